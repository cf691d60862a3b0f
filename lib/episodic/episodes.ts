import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext, ReadContext } from "../context";
import { ExtractionReportRow } from "../db/extraction-report";
import { dbInt, dbJson, dbNumber, dbTimestamp, parsedRowsOf, toIso } from "../db/rows";
import { episodeStatuses, episodes } from "../db/schema";
import type { ProjectRef } from "../db/types";
import {
  cosineDistanceSql,
  datasetFilter,
  exactPathSql,
  nearestSql,
  sameDims,
  searchLimitsFor,
  VECTOR_SCAN_MAX,
  vectorParam,
} from "../db/vectors";
import type { Deps } from "../deps";
import { badRequest, notFound } from "../errors";
import { embedAllOrHeads } from "../llm/refused-inputs";
import { DEFAULT_SETTINGS } from "../settings/settings";
import { budgetSpentSql } from "../usage/budget";
import { usageCollector } from "../usage/collector";
import { carryingUsage, flushUsage, readUsageCteOf } from "../usage/sql";

export type ListableStatus = "pending" | "processing" | "completed" | "failed";

/** An `episodes` row as raw SQL or `row_to_json` gives it (the columns of `EPISODE_COLUMNS`). */
export const EpisodeRow = z.object({
  id: z.string(),
  thread_id: z.string(),
  dataset: z.string(),
  project_id: z.string(),
  status: z.enum(episodeStatuses),
  summary: z.string(),
  key_learnings: dbJson(z.array(z.string())),
  message_count: dbInt,
  token_count: dbInt.nullable(),
  started_at: dbTimestamp,
  ended_at: dbTimestamp,
  processing_started_at: dbTimestamp,
  processing_completed_at: dbTimestamp,
  error: z.string().nullable(),
  retry_count: dbInt,
  metadata: dbJson(z.record(z.string(), z.unknown()).nullable()),
  extraction_report: dbJson(ExtractionReportRow.nullable()),
  created_at: dbTimestamp,
  updated_at: dbTimestamp,
});
export type EpisodeRow = z.output<typeof EpisodeRow>;

/** The columns `episodeRecord` reads. */
const EPISODE_COLUMN_NAMES = [
  "id",
  "thread_id",
  "dataset",
  "project_id",
  "status",
  "summary",
  "key_learnings",
  "message_count",
  "token_count",
  "started_at",
  "ended_at",
  "processing_started_at",
  "processing_completed_at",
  "error",
  "retry_count",
  "metadata",
  "extraction_report",
  "created_at",
  "updated_at",
];
export const EPISODE_COLUMNS = sql.raw(EPISODE_COLUMN_NAMES.join(", "));
/** The same columns of alias `e`. */
const EPISODE_COLUMNS_OF_E = sql.raw(EPISODE_COLUMN_NAMES.map((c) => `e.${c}`).join(", "));

export function episodeRecord(e: EpisodeRow) {
  return {
    episodeId: e.id,
    threadId: e.thread_id,
    dataset: e.dataset,
    projectId: e.project_id,
    status: e.status,
    summary: e.summary,
    keyLearnings: e.key_learnings,
    messageCount: e.message_count,
    tokenCount: e.token_count,
    startedAt: toIso(e.started_at),
    endedAt: toIso(e.ended_at),
    processingStartedAt: toIso(e.processing_started_at),
    processingCompletedAt: toIso(e.processing_completed_at),
    error: e.error,
    retryCount: e.retry_count,
    metadata: e.metadata,
    extractionReport: e.extraction_report,
    createdAt: toIso(e.created_at),
    updatedAt: toIso(e.updated_at),
  };
}

/**
 * Why a pending episode is not being processed, for the episode views (not the export): "budget"
 * while its project's monthly token budget is spent, else null. The budget's month is read once
 * per statement (an uncorrelated subquery), and only when a pending row asks.
 */
export function waitingForSql(projectId: ProjectRef, now: Date): SQL {
  return sql`CASE WHEN status = 'pending' AND ${budgetSpentSql(projectId, now)} THEN 'budget' END AS waiting_for`;
}

export const WaitingRow = EpisodeRow.extend({ waiting_for: z.enum(["budget"]).nullable() });

/**
 * An episode as the episode views show it: the spec's fields, and `waitingFor` only while a
 * pending one waits (absent otherwise, so the spec's shape is unchanged for every other episode).
 */
export function episodeViewRecord(e: z.output<typeof WaitingRow>) {
  return { ...episodeRecord(e), ...(e.waiting_for ? { waitingFor: e.waiting_for } : {}) };
}

/** What a page of the list asks: `before` and `beforeId` are the cursor (listEpisodesSql). */
export interface EpisodePageQuery {
  dataset: string;
  limit: number;
  before?: Date;
  beforeId?: string;
  status: ListableStatus;
}

/** Episodes of a dataset by endedAt descending, cursor `before` (and `beforeId`) on endedAt; one statement. */
export async function listEpisodes({ deps, projectId }: ReadContext, { dataset, ...q }: EpisodePageQuery) {
  const result = await deps.db.execute(listEpisodesSql(projectId, { dataset, ...q }, deps.clock.now()));
  const [row] = parsedRowsOf(z.object({ total: dbInt, page: dbJson(z.array(WaitingRow)) }), result);
  const { page } = row;
  return {
    episodes: page.slice(0, q.limit).map(episodeViewRecord),
    total: row.total,
    hasMore: page.length > q.limit,
  };
}

/**
 * The list's statement. The page and the total are read apart, both along
 * `episodes_dataset_ended_idx`: the page reads its rows alone, the total counts index entries.
 * (Read as one CTE for both, every episode of the dataset was read whole and sorted: 8-10 ms a
 * page at 5,000 episodes on the embedded database, now 2.6-2.7.) The cursor follows the order,
 * ended_at then id: with `beforeId` the episodes that ended at `before` itself and sort after it
 * are on the page too. `before` alone skipped them, and episodes cut from threads imported in one
 * batch all end at the same instant: a client paging a dataset never saw those past a page's end.
 */
export function listEpisodesSql(projectId: ProjectRef, q: EpisodePageQuery, now: Date): SQL {
  const before = q.before?.toISOString() ?? null;
  const inScope = sql`project_id = ${projectId} AND dataset = ${q.dataset} AND status = ${q.status}`;
  const cursor = q.beforeId
    ? sql`ended_at <= ${before}::timestamptz AND (ended_at < ${before}::timestamptz OR id < ${q.beforeId})`
    : sql`ended_at < ${before}::timestamptz`;
  return sql`
    WITH page AS (
      SELECT ${EPISODE_COLUMNS}, ${waitingForSql(projectId, now)}
      FROM ${episodes}
      WHERE ${inScope} AND (${before}::timestamptz IS NULL OR ${cursor})
      ORDER BY ended_at DESC, id DESC LIMIT ${q.limit + 1}
    )
    SELECT (SELECT count(*) FROM ${episodes} WHERE ${inScope})::int AS total,
           coalesce((SELECT json_agg(row_to_json(page) ORDER BY page.ended_at DESC, page.id DESC) FROM page), '[]'::json) AS page`;
}

/**
 * Semantic search of completed summaries: one embedding call, then one statement ranking by
 * cosine × similarityWeight + 1/(1 + daysSince) × recencyWeight (the default episodic settings' unless given).
 */
export async function searchEpisodes(
  { deps, projectId, ledgerProjectId }: ReadContext,
  {
    dataset,
    ...q
  }: { dataset: string; query: string; limit: number; similarityWeight?: number; recencyWeight?: number },
) {
  const usage = usageCollector();
  const scope = { projectId: ledgerProjectId ?? projectId, dataset };
  let vector: number[];
  try {
    // A query longer than the embedding model's window is embedded by its head.
    const meter = usage.meter("episode_search_embedding");
    const signal = AbortSignal.timeout(deps.config.providerDeadlines.queryEmbeddingMs);
    [vector] = await embedAllOrHeads((texts) => deps.llm.embed(texts, meter, signal), [q.query]);
  } catch (err) {
    await flushUsage(deps, usage, scope);
    throw err;
  }
  try {
    return await carryingUsage(usage, (carried) =>
      rankEpisodes(
        deps,
        projectId,
        dataset,
        vector,
        q.limit,
        q.similarityWeight ?? DEFAULT_SETTINGS.episodic.similarityWeight,
        q.recencyWeight ?? DEFAULT_SETTINGS.episodic.recencyWeight,
        // The call is recorded by the ranking statement itself.
        readUsageCteOf(carried, scope, deps.clock.now().toISOString()),
      ),
    );
  } catch (err) {
    await flushUsage(deps, usage, scope);
    throw err;
  }
}

/**
 * The dataset's completed episodes ranked by rankedEpisodesSql (every one exactly while they are
 * few; a large dataset's most recent and nearest), in one statement that also records the
 * query's embedding call (`usage`, a CTE) when given.
 */
export async function rankEpisodes(
  deps: Deps,
  projectId: ProjectRef,
  dataset: string,
  vector: number[],
  limit: number,
  similarityWeight: number,
  recencyWeight: number,
  usage: SQL | null = null,
) {
  const ranking: EpisodeRanking = {
    projectId,
    dataset,
    vector,
    at: deps.clock.now(),
    similarityWeight: sql`${similarityWeight}::float8`,
    recencyWeight: sql`${recencyWeight}::float8`,
    limit: sql`${limit}`,
  };
  const ctes = usage ? [usage, episodePathCte(ranking)] : [episodePathCte(ranking)];
  const result = await deps.db.execute(sql`WITH ${sql.join(ctes, sql`, `)} ${rankedEpisodesSql(ranking)}`);
  return parsedRowsOf(EpisodeRow.extend({ relevance: dbNumber }), result).map((r) => ({
    ...episodeRecord(r),
    relevanceScore: r.relevance,
  }));
}

export interface EpisodeRanking {
  projectId: ProjectRef;
  dataset: string;
  /** The query's embedding; without one the similarity term is 0 and recency alone ranks. */
  vector: number[] | null;
  /** "Now" for the recency term; with `endedBy`, only episodes ended by then take part. */
  at: Date;
  endedBy?: boolean;
  similarityWeight: SQL;
  recencyWeight: SQL;
  limit: SQL;
}

/** The recent and the nearest episodes a large dataset's ranking scores, each: the limit times this, at least EPISODE_DEPTH_MIN. */
const EPISODE_DEPTH_FACTOR = 4;
const EPISODE_DEPTH_MIN = 40;

/** The ranking's dataset filter over alias `e`: its completed episodes (ended by `at` with `endedBy`). */
function completedIn(r: EpisodeRanking, keys: "keyed" | "hidden"): SQL {
  const ended = r.endedBy ? sql` AND e.ended_at <= ${r.at.toISOString()}::timestamptz` : sql``;
  if (keys === "keyed")
    return sql`${datasetFilter("e", r.projectId, r.dataset).keyed} AND e.status = 'completed'${ended}`;
  // Hidden from every B-tree, status too (episodes_retry_idx leads with it): see datasetFilter.
  return sql`${datasetFilter("e", r.projectId, r.dataset).hidden} AND e.status || '' = 'completed'${ended}`;
}

/**
 * The CTE rankedEpisodesSql reads its path from (`episode_path`, one row): whether the dataset's
 * completed episodes are few enough to rank every one (exactPathSql over their count, `counted`),
 * computed once for the statement, whichever branches read it, and the query vector (`q`). The count reads at most one past
 * VECTOR_SCAN_MAX of them unless `whole`, for a caller that reports the total (recall's
 * episodeCount) and so reads them all anyway.
 */
export function episodePathCte(r: EpisodeRanking, { whole = false } = {}): SQL {
  const upTo = whole ? sql`` : sql` LIMIT ${sql.raw(String(VECTOR_SCAN_MAX + 1))}`;
  // The query vector too, sent and parsed once for the statement's two reads of it.
  const q = r.vector ? sql`(${vectorParam(r.vector)})::vector(${sql.raw(String(r.vector.length))})` : sql`NULL::vector`;
  return sql`episode_path AS (SELECT ${exactPathSql(sql`x.counted`, "episodes")} AS small, x.counted, ${q} AS q
    FROM (SELECT count(*) AS counted FROM (SELECT 1 FROM ${episodes} e WHERE ${completedIn(r, "keyed")}${upTo}) own) x)`;
}

/**
 * The statement's last SELECT (or a CTE body; the statement must hold episodePathCte) ranking a
 * dataset's completed episodes by the spec's episode relevance: cosine × similarityWeight +
 * 1/(1 + daysSince) × recencyWeight, days counted from `at` to the episode's end. The weights and
 * limit are SQL so recall can take them from settings inside its own statement.
 *
 * A dataset of a few episodes (one per conversation: most) has every one scored exactly. A large
 * one would read every vector on each call (10,000 episodes: +48 ms a recall at 256 dimensions,
 * bench/RESULTS.md), so it scores only its most recent and its nearest (the HNSW index, through
 * pgvector's iterative scan), each the limit times EPISODE_DEPTH_FACTOR: the recency term decays
 * within days (a month ago: 0.03), so past the recent ones the blend ranks by similarity, and an
 * episode neither recent nor near would need to be both nearly to beat them.
 */
export function rankedEpisodesSql(r: EpisodeRanking): SQL {
  const at = r.at.toISOString();
  const similarity = r.vector
    ? sql`CASE WHEN e.embedding IS NOT NULL AND ${sameDims(sql`e.embedding`, r.vector)}
        THEN 1 - ${cosineDistanceSql(sql`e.embedding`, sql`(SELECT q FROM episode_path)`, r.vector.length)} ELSE 0 END`
    : sql`0`;
  const columns = sql`${EPISODE_COLUMNS_OF_E}, (${similarity})::float8 AS similarity`;
  const small = sql`(SELECT small FROM episode_path)`;
  const depth = sql`GREATEST((${r.limit}) * ${sql.raw(String(EPISODE_DEPTH_FACTOR))}, ${sql.raw(String(EPISODE_DEPTH_MIN))})`;
  const large: SQL[] = [
    sql`(SELECT e.id FROM ${episodes} e WHERE ${completedIn(r, "keyed")} AND NOT ${small}
      ORDER BY e.ended_at DESC LIMIT ${depth})`,
  ];
  if (r.vector) {
    const dims = r.vector.length;
    large.push(
      sql`(SELECT id FROM (${nearestSql({
        from: sql`${episodes} e`,
        column: sql`e.embedding`,
        select: sql`e.id`,
        where: sql`${completedIn(r, "hidden")} AND NOT ${small}`,
        query: sql`(SELECT q FROM episode_path)`,
        dims,
        ...searchLimitsFor(depth, sql`(SELECT counted FROM episode_path)`, dims, sql`false`),
      })}) nearest)`,
    );
  }
  // A large dataset's candidates are read by their key (LIMIT 1 keeps the lookup lateral): a plan
  // made for every dataset could otherwise hash them against the whole table.
  return sql`
    SELECT ${EPISODE_COLUMNS}, similarity * ${r.similarityWeight}
           + (1.0 / (1.0 + GREATEST(EXTRACT(EPOCH FROM (${at}::timestamptz - ended_at)) / 86400.0, 0))) * ${r.recencyWeight} AS relevance
    FROM (
      SELECT ${columns} FROM ${episodes} e WHERE ${completedIn(r, "keyed")} AND ${small}
      UNION ALL
      SELECT x.* FROM (SELECT DISTINCT id FROM (${sql.join(large, sql` UNION ALL `)}) u) c
        CROSS JOIN LATERAL (SELECT ${columns} FROM ${episodes} e WHERE e.id = c.id LIMIT 1) x
    ) candidates
    ORDER BY relevance DESC, id LIMIT ${r.limit}`;
}

export async function getEpisode({ deps, projectId }: ReadContext, { episodeId }: { episodeId: string }) {
  const [row] = parsedRowsOf(
    WaitingRow,
    await deps.db.execute(
      sql`SELECT ${EPISODE_COLUMNS}, ${waitingForSql(projectId, deps.clock.now())}
        FROM ${episodes} WHERE id = ${episodeId} AND project_id = ${projectId}`,
    ),
  );
  if (!row) throw notFound("Episode not found");
  return episodeViewRecord(row);
}

/**
 * Soft delete: archived, out of retrieval; summary, learnings, embedding and facts remain.
 * One statement reports both "not found" and "already archived".
 */
export async function archiveEpisode({ deps, projectId }: ProjectContext, { episodeId }: { episodeId: string }) {
  const now = deps.clock.now().toISOString();
  const [row] = parsedRowsOf(
    z.object({ previous: z.string().nullable(), archived: z.boolean() }),
    await deps.db.execute(sql`
      WITH target AS (SELECT id, status FROM ${episodes} WHERE id = ${episodeId} AND project_id = ${projectId}),
      done AS (
        UPDATE ${episodes} SET status = 'archived', updated_at = ${now}::timestamptz
        WHERE id = (SELECT id FROM target) AND status <> 'archived' RETURNING id
      )
      SELECT (SELECT status FROM target) AS previous, EXISTS (SELECT 1 FROM done) AS archived`),
  );
  if (!row?.previous) throw notFound("Episode not found");
  if (!row.archived) throw badRequest("Episode is already archived");
  return { episodeId, deleted: true as const };
}

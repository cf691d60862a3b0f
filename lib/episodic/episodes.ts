import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext, ReadContext } from "../context";
import { ExtractionReportRow } from "../db/extraction-report";
import { dbInt, dbJson, dbNumber, dbTimestamp, parsedRowsOf, toIso } from "../db/rows";
import { episodeStatuses, episodes } from "../db/schema";
import type { ProjectRef } from "../db/types";
import { cosineDistanceSql, sameDims, vectorParam } from "../db/vectors";
import type { Deps } from "../deps";
import { badRequest, notFound } from "../errors";
import { DEFAULT_SETTINGS } from "../settings/settings";
import { budgetSpentSql } from "../usage/budget";
import { usageCollector } from "../usage/collector";
import { flushUsage, leadingUsage } from "../usage/sql";

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
export const EPISODE_COLUMNS = sql.raw(
  "id, thread_id, dataset, project_id, status, summary, key_learnings, message_count, token_count, started_at, ended_at, processing_started_at, processing_completed_at, error, retry_count, metadata, extraction_report, created_at, updated_at",
);

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

/** Episodes of a dataset by endedAt descending, cursor `before` on endedAt; one statement. */
export async function listEpisodes(
  { deps, projectId }: ReadContext,
  { dataset, ...q }: { dataset: string; limit: number; before?: Date; status: ListableStatus },
) {
  const before = q.before?.toISOString() ?? null;
  const result = await deps.db.execute(sql`
    WITH scope AS (
      SELECT ${EPISODE_COLUMNS}, ${waitingForSql(projectId, deps.clock.now())}
      FROM ${episodes} WHERE project_id = ${projectId} AND dataset = ${dataset} AND status = ${q.status}
    ),
    page AS (
      SELECT * FROM scope WHERE (${before}::timestamptz IS NULL OR ended_at < ${before}::timestamptz)
      ORDER BY ended_at DESC, id DESC LIMIT ${q.limit + 1}
    )
    SELECT (SELECT count(*) FROM scope)::int AS total,
           coalesce((SELECT json_agg(row_to_json(page) ORDER BY page.ended_at DESC, page.id DESC) FROM page), '[]'::json) AS page`);
  const [row] = parsedRowsOf(z.object({ total: dbInt, page: dbJson(z.array(WaitingRow)) }), result);
  const { page } = row;
  return {
    episodes: page.slice(0, q.limit).map(episodeViewRecord),
    total: row.total,
    hasMore: page.length > q.limit,
  };
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
    [vector] = await deps.llm.embed([q.query], usage.meter("episode_search_embedding"));
  } catch (err) {
    await flushUsage(deps, usage, scope);
    throw err;
  }
  return rankEpisodes(
    deps,
    projectId,
    dataset,
    vector,
    q.limit,
    q.similarityWeight ?? DEFAULT_SETTINGS.episodic.similarityWeight,
    q.recencyWeight ?? DEFAULT_SETTINGS.episodic.recencyWeight,
    {
      // The call is recorded by the ranking statement itself.
      lead: leadingUsage(usage, scope, deps.clock.now().toISOString()),
    },
  );
}

/**
 * Ranks every completed episode of the dataset exactly (full-precision cosine, then the blend).
 * Deliberately not an ORDER BY over the HNSW index: an index scan yields only `hnsw.ef_search`
 * (40) nearest rows of the whole table before the project/dataset filter applies, so a dataset
 * whose episodes are not among the table's nearest would find nothing; and the recency term can
 * lift an episode that the nearest-by-cosine candidates would leave out. A dataset's episodes are
 * few (one per conversation), and the (project, dataset, status) index narrows the scan to them.
 */
export async function rankEpisodes(
  deps: Deps,
  projectId: ProjectRef,
  dataset: string,
  vector: number[],
  limit: number,
  similarityWeight: number,
  recencyWeight: number,
  { lead = sql`` }: { lead?: SQL } = {},
) {
  const result = await deps.db.execute(
    sql`${lead}${rankedEpisodesSql({
      projectId,
      dataset,
      vector,
      at: deps.clock.now(),
      similarityWeight: sql`${similarityWeight}::float8`,
      recencyWeight: sql`${recencyWeight}::float8`,
      limit: sql`${limit}`,
    })}`,
  );
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

/**
 * The statement (or a CTE body) ranking a dataset's completed episodes by the spec's episode
 * relevance: cosine × similarityWeight + 1/(1 + daysSince) × recencyWeight, days counted from
 * `at` to the episode's end. The weights and limit are SQL so recall can take them from settings
 * inside its own statement.
 */
export function rankedEpisodesSql(r: EpisodeRanking): SQL {
  const at = r.at.toISOString();
  const similarity = r.vector
    ? sql`CASE WHEN embedding IS NOT NULL AND ${sameDims(sql`embedding`, r.vector)}
        THEN 1 - ${cosineDistanceSql(sql`embedding`, vectorParam(r.vector), r.vector.length)} ELSE 0 END`
    : sql`0`;
  const ended = r.endedBy ? sql` AND ended_at <= ${at}::timestamptz` : sql``;
  return sql`
    SELECT ${EPISODE_COLUMNS}, similarity * ${r.similarityWeight}
           + (1.0 / (1.0 + GREATEST(EXTRACT(EPOCH FROM (${at}::timestamptz - ended_at)) / 86400.0, 0))) * ${r.recencyWeight} AS relevance
    FROM (
      SELECT ${EPISODE_COLUMNS}, (${similarity})::float8 AS similarity FROM ${episodes}
      WHERE project_id = ${r.projectId} AND dataset = ${r.dataset} AND status = 'completed'${ended}
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

import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, dbTimestampSet, parsedRowsOf } from "../db/rows";
import { entities, episodes, factEntities, facts, messages, semanticStatuses, threads } from "../db/schema";
import type { Deps } from "../deps";
import { EPISODE_COLUMNS, episodeViewRecord, WaitingRow, waitingForSql } from "../episodic/episodes";
import { retryEpisode } from "../episodic/triggers";
import { HttpError, notFound } from "../errors";
import { unindexQuotingMessagesCtes } from "../evidence/write";
import { projectFoundColumn, requireProject } from "../projects";
import { FACT_COLUMNS, FactRow, factRecord } from "../semantic/facts";
import { retryExtraction } from "../semantic/jobs";
import { RawThreadRow, threadFromRaw, threadRecord } from "../threads";
import { MessageRow, messageRecord } from "../working/messages";

/** ` AND dataset = …` when a dataset is named (the row's own `dataset` column), else nothing. */
const inDataset = (dataset: string | undefined) => (dataset === undefined ? sql`` : sql` AND dataset = ${dataset}`);

/**
 * The dashboard's read-only views of a project's memory (and the two writes an operator needs:
 * retrying a failed episode, deleting a fact). Every dataset of the project is readable. Each
 * function is one statement: lists carry their total, single objects their not-found check.
 */

type Page = { limit: number; offset: number };

/**
 * A page of rows as `json_agg` gives it, with the total of every matching row and whether the
 * project exists (projectFoundColumn: an unknown project is a 404, not an empty list).
 */
const pageOf = <S extends z.ZodType>(row: S) => z.object({ found: dbInt, total: dbInt, page: dbJson(z.array(row)) });

// --- Datasets ----------------------------------------------------------------------------------

const DatasetRow = z.object({
  dataset: z.string(),
  threads: z.number(),
  messages: z.number(),
  episodes: z.number(),
  facts: z.number(),
  live_facts: z.number(),
  entities: z.number(),
  last_activity_at: z.string().nullable(),
});

/**
 * Every dataset of the project (a dataset exists through its threads, episodes, facts or
 * entities) with its counts, most recently active first. Messages are what callers wrote (the
 * threads' sequence counters less the compaction summaries, as project stats count them);
 * episodes leave out deleted ones. Activity: the latest thread creation or message, episode,
 * fact or entity.
 */
export async function browseDatasets({ deps, projectId }: ProjectContext, page: Page) {
  const [row] = parsedRowsOf(
    pageOf(DatasetRow),
    await deps.db.execute(sql`
      WITH th AS (
        SELECT dataset, count(*) AS n, sum(last_seq - summary_count) AS written,
          max(coalesce(last_message_at, created_at)) AS at
        FROM ${threads} WHERE project_id = ${projectId} GROUP BY dataset),
      ep AS (
        SELECT dataset, count(*) AS n, max(created_at) AS at FROM ${episodes}
        WHERE project_id = ${projectId} AND status <> 'deleted' GROUP BY dataset),
      fa AS (
        SELECT dataset, count(*) AS n, count(*) FILTER (WHERE invalid_at IS NULL) AS live, max(created_at) AS at
        FROM ${facts} WHERE project_id = ${projectId} GROUP BY dataset),
      en AS (
        SELECT dataset, count(*) AS n, max(created_at) AS at FROM ${entities}
        WHERE project_id = ${projectId} GROUP BY dataset),
      ds AS (
        SELECT d.dataset, coalesce(th.n, 0)::int AS threads, coalesce(th.written, 0)::int AS messages,
          coalesce(ep.n, 0)::int AS episodes, coalesce(fa.n, 0)::int AS facts, coalesce(fa.live, 0)::int AS live_facts,
          coalesce(en.n, 0)::int AS entities, GREATEST(th.at, ep.at, fa.at, en.at) AS last_activity_at
        FROM (SELECT dataset FROM th UNION SELECT dataset FROM ep UNION SELECT dataset FROM fa UNION SELECT dataset FROM en) d
          LEFT JOIN th USING (dataset) LEFT JOIN ep USING (dataset)
          LEFT JOIN fa USING (dataset) LEFT JOIN en USING (dataset))
      SELECT ${projectFoundColumn(projectId)}, (SELECT count(*) FROM ds)::int AS total,
        coalesce((SELECT json_agg(row_to_json(p) ORDER BY p.last_activity_at DESC NULLS LAST, p.dataset) FROM (
          SELECT * FROM ds ORDER BY last_activity_at DESC NULLS LAST, dataset
          LIMIT ${page.limit} OFFSET ${page.offset}) p), '[]'::json) AS page`),
  );
  requireProject(row);
  return {
    datasets: row.page.map((d) => ({
      dataset: d.dataset,
      threads: d.threads,
      messages: d.messages,
      episodes: d.episodes,
      facts: d.facts,
      liveFacts: d.live_facts,
      entities: d.entities,
      lastActivityAt: d.last_activity_at == null ? null : new Date(d.last_activity_at).toISOString(),
    })),
    total: row.total,
  };
}

// --- A thread's messages -----------------------------------------------------------------------

const MessageJson = MessageRow.extend({ is_summary: z.boolean() });
type MessageJson = z.output<typeof MessageJson>;

function browseMessage(m: MessageJson) {
  return { ...messageRecord(m), compacted: m.compacted_at != null, summary: m.is_summary === true };
}

/**
 * Every row of a thread, compacted ones and compaction summaries included (marked), a page at a
 * time: the `limit` newest below the cursor (a sequence number), in reading order. Also the
 * thread and its active summary. With a `dataset` (the dashboard's thread page names one in its
 * route), a thread of another dataset is not found either. One statement.
 */
export async function browseThreadMessages(
  { deps, projectId }: ProjectContext,
  { threadId, ...q }: { threadId: string; limit: number; before?: number; dataset?: string },
) {
  const before = q.before ?? null;
  const [row] = parsedRowsOf(
    z.object({
      thread: dbJson(RawThreadRow.nullable()),
      page: dbJson(z.array(MessageJson)),
      active: dbJson(MessageJson.nullable()),
    }),
    await deps.db.execute(sql`
      WITH t AS (SELECT * FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}${inDataset(q.dataset)}),
      page AS (
        SELECT m.* FROM ${messages} m
        WHERE m.thread_id = (SELECT id FROM t) AND (${before}::int IS NULL OR m.seq < ${before}::int)
        ORDER BY m.seq DESC LIMIT ${q.limit + 1})
      SELECT (SELECT row_to_json(t) FROM t) AS thread,
        coalesce((SELECT json_agg(row_to_json(page) ORDER BY page.seq DESC) FROM page), '[]'::json) AS page,
        (SELECT row_to_json(s) FROM (
          SELECT * FROM ${messages} WHERE thread_id = (SELECT id FROM t) AND is_summary AND compacted_at IS NULL
          ORDER BY seq DESC LIMIT 1) s) AS active`),
  );
  if (!row?.thread) throw notFound("Thread not found");
  const { page } = row;
  const rows = page.slice(0, q.limit).reverse();
  return {
    thread: threadRecord(threadFromRaw(row.thread)),
    messages: rows.map(browseMessage),
    activeSummary: row.active ? browseMessage(row.active) : null,
    nextCursor: page.length > q.limit && rows.length > 0 ? String(rows[0].seq) : null,
  };
}

// --- Episodes ----------------------------------------------------------------------------------

export type BrowseStatus = "pending" | "processing" | "completed" | "failed" | "archived";

const BrowseEpisodeRow = WaitingRow.extend({
  semantic_status: z.enum(semanticStatuses),
  semantic_error: z.string().nullable(),
  semantic_retry_count: dbInt,
  summarised: z.boolean(),
});
type BrowseEpisodeRow = z.output<typeof BrowseEpisodeRow>;

/** The /v1 episode view's columns and what its extraction needs. */
const browseEpisodeColumns = (projectId: string, now: Date) => sql`${EPISODE_COLUMNS}, ${waitingForSql(projectId, now)},
  semantic_status, semantic_error, semantic_retry_count, embedding IS NOT NULL AS summarised`;

/**
 * The /v1 episode plus its fact extraction, which only a summarised episode has (a completed
 * one, or an archived one that was completed): the internal status, its error, and how many
 * runs started (the first one and every re-queue).
 */
function browseEpisode(e: BrowseEpisodeRow) {
  const ran = ["processing", "completed", "failed"].includes(e.semantic_status) ? 1 : 0;
  return {
    ...episodeViewRecord(e),
    extraction:
      e.status === "completed" || (e.status === "archived" && e.summarised)
        ? { status: e.semantic_status, error: e.semantic_error, attempts: e.semantic_retry_count + ran }
        : null,
  };
}

/** A project's episodes, newest first, any status but deleted (or one status); one statement. */
export async function browseEpisodes(
  { deps, projectId }: ProjectContext,
  q: Page & { dataset?: string; status?: BrowseStatus },
) {
  const scope = sql`project_id = ${projectId} AND status <> 'deleted'${inDataset(q.dataset)}${
    q.status === undefined ? sql`` : sql` AND status = ${q.status}`
  }`;
  const [row] = parsedRowsOf(
    pageOf(BrowseEpisodeRow),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)}, (SELECT count(*) FROM ${episodes} WHERE ${scope})::int AS total,
        coalesce((SELECT json_agg(row_to_json(p) ORDER BY p.created_at DESC, p.id DESC) FROM (
          SELECT ${browseEpisodeColumns(projectId, deps.clock.now())} FROM ${episodes} WHERE ${scope}
          ORDER BY created_at DESC, id DESC LIMIT ${q.limit} OFFSET ${q.offset}) p), '[]'::json) AS page`),
  );
  requireProject(row);
  return { episodes: row.page.map(browseEpisode), total: row.total };
}

async function getBrowseEpisode(deps: Deps, projectId: string, episodeId: string) {
  const [row] = parsedRowsOf(
    BrowseEpisodeRow,
    await deps.db.execute(sql`
      SELECT ${browseEpisodeColumns(projectId, deps.clock.now())} FROM ${episodes}
      WHERE id = ${episodeId} AND project_id = ${projectId} AND status <> 'deleted'`),
  );
  if (!row) throw notFound("Episode not found");
  return browseEpisode(row);
}

/**
 * The /v1 retry (failed episodes only, the cap bypassed, processing asynchronous), or, for a
 * completed episode whose fact extraction failed (which /v1 cannot name), the extraction's retry;
 * then the episode as it now is. Two statements, three for an extraction.
 */
export async function retryBrowseEpisode(ctx: ProjectContext, { episodeId }: { episodeId: string }) {
  try {
    await retryEpisode(ctx, { episodeId });
  } catch (err) {
    if (!(err instanceof HttpError && err.status === 400) || !(await retryExtraction(ctx, { episodeId }))) throw err;
  }
  return getBrowseEpisode(ctx.deps, ctx.projectId, episodeId);
}

// --- Facts and entities ------------------------------------------------------------------------

const EntityRef = z.object({ entityId: z.string(), name: z.string(), type: z.string() });
const BrowseFactRow = FactRow.extend({ created_at: dbTimestampSet, entities: dbJson(z.array(EntityRef)) });
type BrowseFactRow = z.output<typeof BrowseFactRow>;

/** The fact columns, its creation time and the entities it is linked to (`f` is the fact). */
const BROWSE_FACT_COLUMNS = sql`${FACT_COLUMNS}, f.created_at, coalesce((
    SELECT json_agg(json_build_object('entityId', e.id, 'name', e.name, 'type', e.type) ORDER BY lower(e.name), e.name, e.type)
    FROM ${factEntities} fe JOIN ${entities} e ON e.id = fe.entity_id WHERE fe.fact_id = f.id), '[]'::json) AS entities`;

function browseFact(f: BrowseFactRow) {
  return {
    ...factRecord(f),
    createdAt: new Date(f.created_at).toISOString(),
    entities: f.entities,
  };
}

const newestValidFirst = sql.raw("ORDER BY valid_at DESC, id DESC");

/** A page of facts (`from` selects `f.*`-style rows), newest validAt first, as JSON. */
const factPage = (from: SQL) =>
  sql`coalesce((SELECT json_agg(row_to_json(p) ${newestValidFirst}) FROM (${from}) p), '[]'::json)`;

/** A dataset's facts, live ones only unless `includeInvalidated`, newest validAt first; one statement. */
export async function browseFacts(
  { deps, projectId }: ProjectContext,
  q: Page & { dataset: string; includeInvalidated: boolean },
) {
  const scope = sql`f.project_id = ${projectId} AND f.dataset = ${q.dataset}${q.includeInvalidated ? sql`` : sql` AND f.invalid_at IS NULL`}`;
  const [row] = parsedRowsOf(
    pageOf(BrowseFactRow),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)}, (SELECT count(*) FROM ${facts} f WHERE ${scope})::int AS total,
        ${factPage(sql`SELECT ${BROWSE_FACT_COLUMNS} FROM ${facts} f WHERE ${scope}
          ORDER BY f.valid_at DESC, f.id DESC LIMIT ${q.limit} OFFSET ${q.offset}`)} AS page`),
  );
  requireProject(row);
  return { facts: row.page.map(browseFact), total: row.total };
}

/**
 * Removes a fact of the project permanently; its entity links go with it (the foreign key
 * cascades), and the messages that said it leave recall's conversation evidence, as with the /v1
 * delete (which invalidates instead). One statement.
 */
export async function deleteFact({ deps, projectId }: ProjectContext, { factId }: { factId: string }): Promise<void> {
  const deleted = parsedRowsOf(
    z.object({ id: z.string() }),
    await deps.db.execute(sql`
      WITH forgotten AS (
        DELETE FROM ${facts} WHERE id = ${factId} AND project_id = ${projectId}
        RETURNING id, project_id, dataset, source_quote),
      ${unindexQuotingMessagesCtes()}
      SELECT id FROM forgotten`),
  );
  if (deleted.length === 0) throw notFound("Fact not found");
}

const EntityRow = z.object({ id: z.string(), name: z.string(), type: z.string() });

/** A dataset's entities by name, each with its count of live linked facts; one statement. */
export async function browseEntities({ deps, projectId }: ProjectContext, q: Page & { dataset: string }) {
  const scope = sql`project_id = ${projectId} AND dataset = ${q.dataset}`;
  const [row] = parsedRowsOf(
    pageOf(EntityRow.extend({ facts: z.number() })),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)}, (SELECT count(*) FROM ${entities} WHERE ${scope})::int AS total,
        coalesce((SELECT json_agg(row_to_json(p) ORDER BY lower(p.name), p.name, p.type, p.id) FROM (
          SELECT e.id, e.name, e.type, (
            SELECT count(*) FROM ${factEntities} fe JOIN ${facts} f ON f.id = fe.fact_id
            WHERE fe.entity_id = e.id AND f.invalid_at IS NULL)::int AS facts
          FROM ${entities} e WHERE ${scope}
          ORDER BY lower(e.name), e.name, e.type, e.id LIMIT ${q.limit} OFFSET ${q.offset}) p), '[]'::json) AS page`),
  );
  requireProject(row);
  return {
    entities: row.page.map((e) => ({ entityId: e.id, name: e.name, type: e.type, facts: e.facts })),
    total: row.total,
  };
}

/**
 * An entity of the project and the facts linked to it (live ones unless asked), one statement.
 * With a `dataset` (the dashboard's entity page names one in its route), an entity of another
 * dataset is not found either.
 */
export async function browseEntityFacts(
  { deps, projectId }: ProjectContext,
  { entityId, ...q }: { entityId: string; includeInvalidated: boolean; dataset?: string },
) {
  const [row] = parsedRowsOf(
    z.object({ entity: dbJson(EntityRow.nullable()), page: dbJson(z.array(BrowseFactRow)) }),
    await deps.db.execute(sql`
      WITH ent AS (SELECT id, name, type FROM ${entities} WHERE id = ${entityId} AND project_id = ${projectId}${inDataset(q.dataset)})
      SELECT (SELECT row_to_json(ent) FROM ent) AS entity,
        ${factPage(sql`SELECT ${BROWSE_FACT_COLUMNS} FROM ${facts} f
          WHERE f.project_id = ${projectId}${q.includeInvalidated ? sql`` : sql` AND f.invalid_at IS NULL`}
            AND f.id IN (SELECT fact_id FROM ${factEntities} WHERE entity_id = (SELECT id FROM ent))`)} AS page`),
  );
  if (!row?.entity) throw notFound("Entity not found");
  const { entity } = row;
  return {
    entity: { entityId: entity.id, name: entity.name, type: entity.type },
    facts: row.page.map(browseFact),
  };
}

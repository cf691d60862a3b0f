import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext, ReadContext } from "../context";
import { dbInt, dbJson, dbTimestamp, dbTimestampSet, jsonOf, parsedRowsOf, toIso } from "../db/rows";
import { entities, episodes, facts, idempotencyKeys, jobs, messages, threads, webhookDeliveries } from "../db/schema";
import type { ProjectRef } from "../db/types";
import type { Deps } from "../deps";
import { EPISODE_COLUMNS, EpisodeRow, episodeRecord } from "../episodic/episodes";
import { jobKeySql } from "../jobs/kinds";
import { FACT_COLUMNS, FactRow, factRecord } from "../semantic/facts";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";

/** Rows per statement while exporting: bounds memory whatever the dataset's size. */
export const EXPORT_PAGE_ROWS = 500;

/**
 * Message text per statement while exporting (bytes, as stored). A message may be 1 MB, so 500 of
 * them were a 500 MB result: past Neon's 10 MB HTTP response and a Worker's 128 MB. A page stops
 * before the message that would take it over, and always holds one.
 */
export const EXPORT_PAGE_BYTES = 2_000_000;

/**
 * The whole dataset as the spec's export document, produced as JSON text chunks, one per page of
 * rows read (keyset pagination), so a large dataset is never held in memory, let alone twice.
 * Order: threads by creation with their messages by sequence, episodes, facts (live and
 * superseded) and entities by creation. The first page of every part is read before the answer
 * starts, in one batch (one round trip over Neon's HTTP driver, with a read's API key check): a
 * dataset of up to a page per part is one round trip, and a refused key is a 401, not a broken
 * stream. Later pages are one statement each, so rows written while an export runs may or may not
 * appear in it.
 */
export async function exportDataset({ deps, projectId }: ReadContext, { dataset }: { dataset: string }) {
  const pages = {
    threads: (last?: ThreadMessageRow) => threadMessagePage(projectId, dataset, last),
    episodes: keysetPage((after) => episodePage(projectId, dataset, after)),
    facts: keysetPage((after) => factPage(projectId, dataset, after)),
    entities: keysetPage((after) => entityPage(projectId, dataset, after)),
  };
  const first = await deps.database.batch((db) =>
    [pages.threads(), pages.episodes(), pages.facts(), pages.entities()].map((page) => db.execute(page)),
  );
  return exportChunks(deps, dataset, {
    threads: pagesFrom(deps, ThreadMessageRow, first[0], pages.threads, lastThreadPage),
    episodes: pagesFrom(deps, EpisodeRow.extend(KEYED), first[1], pages.episodes),
    facts: pagesFrom(deps, FactRow.extend(KEYED), first[2], pages.facts),
    entities: pagesFrom(deps, EntityRow, first[3], pages.entities),
  });
}

async function* exportChunks(
  deps: Deps,
  dataset: string,
  parts: {
    threads: AsyncGenerator<ThreadMessageRow[]>;
    episodes: AsyncGenerator<(EpisodeRow & Keyed)[]>;
    facts: AsyncGenerator<(FactRow & Keyed)[]>;
    entities: AsyncGenerator<z.output<typeof EntityRow>[]>;
  },
): AsyncGenerator<string> {
  const exportedAt = deps.clock.now().toISOString();
  yield `{"dataset":${JSON.stringify(dataset)},"exportedAt":"${exportedAt}","threads":[`;
  let state = THREADS_START;
  for await (const page of parts.threads) {
    const next = threadsChunk(state, page);
    state = next.state;
    yield next.chunk;
  }
  if (state.openThread !== null) yield "]}";

  yield '],"episodes":[';
  yield* jsonArrayItems(parts.episodes, (row) => episodeRecord(row));
  yield '],"facts":[';
  yield* jsonArrayItems(parts.facts, (row) => {
    const { relevanceScore: _, ...fact } = factRecord(row);
    return fact;
  });
  yield '],"entities":[';
  yield* jsonArrayItems(parts.entities, (row) => ({ name: row.name, type: row.type }));
  yield "]}";
}

export interface ThreadsState {
  /** The thread whose messages array is open, if any. */
  openThread: string | null;
  firstThread: boolean;
  firstMessage: boolean;
}

export const THREADS_START: ThreadsState = { openThread: null, firstThread: true, firstMessage: true };

export type ThreadMessageJson = Pick<
  ThreadMessageRow,
  "thread_id" | "tags" | "created_at" | "seq" | "role" | "content" | "message_created_at"
>;

/**
 * The JSON text of one page of the threads walk: a thread opens when its first row comes (closing
 * the one before), its messages follow; a thread's messages may span pages, so the walk's state
 * is carried from page to page.
 */
export function threadsChunk(start: ThreadsState, page: ThreadMessageJson[]): { chunk: string; state: ThreadsState } {
  let { openThread, firstThread, firstMessage } = start;
  let chunk = "";
  for (const row of page) {
    if (row.thread_id !== openThread) {
      if (openThread !== null) chunk += "]}";
      const head = JSON.stringify({
        threadId: row.thread_id,
        tags: jsonOf(row.tags),
        createdAt: toIso(row.created_at),
      });
      chunk += `${firstThread ? "" : ","}${head.slice(0, -1)},"messages":[`;
      openThread = row.thread_id;
      firstThread = false;
      firstMessage = true;
    }
    if (row.seq === null) continue;
    chunk += `${firstMessage ? "" : ","}${JSON.stringify({
      role: row.role,
      content: row.content,
      createdAt: toIso(row.message_created_at),
    })}`;
    firstMessage = false;
  }
  return { chunk, state: { openThread, firstThread, firstMessage } };
}

/** A keyset position: the row's id and its created_at as Postgres prints it (microseconds kept). */
const KEYED = { id: z.string(), cursor: z.string() };
type Keyed = { id: string; cursor: string };

const EntityRow = z.object({ ...KEYED, name: z.string(), type: z.string() });

type After = (createdAt: SQL, id?: SQL) => SQL;

const episodePage = (projectId: ProjectRef, dataset: string, after: After) => sql`
  SELECT ${EPISODE_COLUMNS}, created_at::text AS cursor
  FROM ${episodes} WHERE project_id = ${projectId} AND dataset = ${dataset}${after(sql`created_at`)}
  ORDER BY created_at, id LIMIT ${EXPORT_PAGE_ROWS}`;

const factPage = (projectId: ProjectRef, dataset: string, after: After) => sql`
  SELECT ${FACT_COLUMNS}, f.created_at::text AS cursor FROM ${facts} f
  WHERE f.project_id = ${projectId} AND f.dataset = ${dataset}${after(sql`f.created_at`, sql`f.id`)}
  ORDER BY f.created_at, f.id LIMIT ${EXPORT_PAGE_ROWS}`;

const entityPage = (projectId: ProjectRef, dataset: string, after: After) => sql`
  SELECT id, name, type, created_at::text AS cursor FROM ${entities}
  WHERE project_id = ${projectId} AND dataset = ${dataset}${after(sql`created_at`)}
  ORDER BY created_at, id LIMIT ${EXPORT_PAGE_ROWS}`;

/**
 * Keyset pages over (created_at, id): the page after `last`, or the first. The cursor is
 * created_at as Postgres prints it, so it keeps its microseconds (a JS Date would round them away
 * and repeat or skip rows).
 */
function keysetPage(page: (after: After) => SQL) {
  return (last?: Keyed) =>
    page((createdAt, id = sql`id`) =>
      last ? sql` AND (${createdAt}, ${id}) > (${last.cursor}::timestamptz, ${last.id})` : sql``,
    );
}

/** The `first` page's rows, then the pages after it, one statement each, until `isLast` (by default, a page that comes back short). */
async function* pagesFrom<S extends z.ZodType>(
  deps: Deps,
  row: S,
  first: unknown,
  pageAfter: (last: z.output<S>) => SQL,
  isLast: (rows: z.output<S>[]) => boolean = (rows) => rows.length < EXPORT_PAGE_ROWS,
): AsyncGenerator<z.output<S>[]> {
  let rows = parsedRowsOf(row, first);
  for (;;) {
    if (rows.length > 0) yield rows;
    if (isLast(rows)) return;
    rows = parsedRowsOf(row, await deps.db.execute(pageAfter(rows[rows.length - 1])));
  }
}

/** The threads walk's last page: short of the row limit, and not cut short by EXPORT_PAGE_BYTES. */
export function lastThreadPage(rows: { page_rows: number }[]): boolean {
  return rows.length === 0 || (rows.length < EXPORT_PAGE_ROWS && rows.length === rows[0].page_rows);
}

async function* jsonArrayItems<T>(pages: AsyncGenerator<T[]>, record: (row: T) => unknown): AsyncGenerator<string> {
  let first = true;
  for await (const rows of pages) {
    const items = rows.map((row) => JSON.stringify(record(row))).join(",");
    yield first ? items : `,${items}`;
    first = false;
  }
}

/** A row of the threads walk: a thread and one of its messages (all null for a thread without any). */
const ThreadMessageRow = z.object({
  thread_id: z.string(),
  tags: dbJson(z.array(z.string())),
  created_at: dbTimestampSet,
  cursor: z.string(),
  seq: dbInt.nullable(),
  role: z.string().nullable(),
  content: z.string().nullable(),
  message_created_at: dbTimestamp,
  /** The rows the page's statement read before EXPORT_PAGE_BYTES cut it. */
  page_rows: dbInt,
});
type ThreadMessageRow = z.output<typeof ThreadMessageRow>;

/**
 * Threads with their messages, as one keyset walk over (thread created_at, thread id, seq): the
 * page after `last`, or the first. A thread without messages is one row with a null seq (0 in the
 * cursor: sequences start at 1). The page ends at EXPORT_PAGE_ROWS rows or before the message that
 * would take its text over EXPORT_PAGE_BYTES (`octet_length` reads a stored text's size without
 * reading the text), whichever comes first.
 */
function threadMessagePage(projectId: ProjectRef, dataset: string, last?: ThreadMessageRow): SQL {
  const after = last
    ? sql` AND t.created_at >= ${last.cursor}::timestamptz
           AND (t.created_at, t.id, coalesce(m.seq, 0)) > (${last.cursor}::timestamptz, ${last.thread_id}, ${last.seq ?? 0})`
    : sql``;
  return sql`
    SELECT thread_id, tags, created_at, cursor, seq, role, content, message_created_at, page_rows FROM (
      SELECT page.*, count(*) OVER () AS page_rows,
        row_number() OVER walk AS n, sum(coalesce(octet_length(content), 0)) OVER walk AS bytes_through
      FROM (
        SELECT t.id AS thread_id, to_jsonb(t.tags) AS tags, t.created_at, t.created_at::text AS cursor,
          m.seq, m.role, m.content, m.created_at AS message_created_at
        FROM ${threads} t LEFT JOIN ${messages} m ON m.thread_id = t.id
        WHERE t.project_id = ${projectId} AND t.dataset = ${dataset}${after}
        ORDER BY t.created_at, t.id, m.seq NULLS FIRST LIMIT ${EXPORT_PAGE_ROWS}) page
      WINDOW walk AS (ORDER BY created_at, thread_id, seq NULLS FIRST ROWS UNBOUNDED PRECEDING)) sized
    WHERE n = 1 OR bytes_through <= ${sql.raw(String(EXPORT_PAGE_BYTES))}
    ORDER BY created_at, thread_id, seq NULLS FIRST`;
}

/**
 * Hard-erases the dataset in one transaction on every driver: threads (their
 * messages cascade), episodes, facts (their entity links cascade), entities and the dataset's
 * pending jobs. Also what holds copies of its text elsewhere: the stored `Idempotency-Key` answers
 * of requests that named it (a chat's reply, a recall's facts), and its webhook deliveries (an
 * episode's summary), pending or done, with their attempts and jobs, so none is sent again.
 * Work already running for the dataset finds its rows gone and writes nothing: its final write is
 * conditional on the episode it claimed.
 *
 * Two statements in one transaction (one round trip over Neon's HTTP driver). The first locks the
 * dataset's threads and episodes, so it waits for the writes holding them (a message's insert, an
 * episode's cut, an extraction's fact batch, which locks its episode) to commit. The second then
 * erases with a snapshot that holds what they wrote. In one statement, a write that committed
 * while the erase waited for its lock was missed: on a server, an extraction's facts, or the
 * episode a cut had just made, outlived the erase.
 */
export async function eraseDataset({ deps, projectId }: ProjectContext, { dataset }: { dataset: string }) {
  const scope = (table: typeof threads | typeof episodes | typeof facts | typeof entities | typeof jobs) =>
    sql`${table.projectId} = ${projectId} AND ${table.dataset} = ${dataset}`;
  const lockWriters = sql`
    SELECT (SELECT count(*) FROM (SELECT 1 FROM ${threads} WHERE ${scope(threads)} ORDER BY id FOR UPDATE) th) AS threads,
      (SELECT count(*) FROM (SELECT 1 FROM ${episodes} WHERE ${scope(episodes)} ORDER BY id FOR UPDATE) ep) AS episodes`;
  const [, erased] = await deps.database.batch((db) => [
    db.execute(lockWriters),
    db.execute(sql`
      WITH t AS (DELETE FROM ${threads} WHERE ${scope(threads)} RETURNING 1),
        e AS (DELETE FROM ${episodes} WHERE ${scope(episodes)} RETURNING 1),
        f AS (DELETE FROM ${facts} WHERE ${scope(facts)} RETURNING 1),
        n AS (DELETE FROM ${entities} WHERE ${scope(entities)} RETURNING 1),
        wd AS (
          DELETE FROM ${webhookDeliveries} WHERE project_id = ${projectId}
            AND payload -> 'data' ->> 'dataset' = ${dataset} AND event_type <> 'dataset.erased'
          RETURNING id),
        j AS (
          DELETE FROM ${jobs} WHERE ${scope(jobs)}
            OR (project_id = ${projectId} AND key IN (SELECT ${jobKeySql("webhook", sql`id`)} FROM wd))
          RETURNING 1),
        -- Stored answers, and claims still running (a request that read the dataset before this
        -- erase then stores nothing); this erase's own claim names no dataset (answerScope).
        k AS (DELETE FROM ${idempotencyKeys} WHERE project_id = ${projectId} AND ${dataset} = ANY (datasets)),
        ${webhookEventCtes(
          "dataset.erased",
          sql`SELECT ${projectId}::text AS project_id, jsonb_build_object('dataset', ${dataset}::text,
            'deleted', jsonb_build_object('threads', (SELECT count(*) FROM t), 'episodes', (SELECT count(*) FROM e),
              'facts', (SELECT count(*) FROM f), 'entities', (SELECT count(*) FROM n))) AS data`,
          deps.clock.now().toISOString(),
        )}
      SELECT (SELECT count(*) FROM t) AS threads, (SELECT count(*) FROM e) AS episodes,
        (SELECT count(*) FROM f) AS facts, (SELECT count(*) FROM n) AS entities,
        (SELECT count(*) FROM j) AS jobs, ${webhookJobsColumn} AS webhook_jobs`),
  ]);
  const [row] = parsedRowsOf(
    z.object({ threads: dbInt, episodes: dbInt, facts: dbInt, entities: dbInt, webhook_jobs: z.unknown() }),
    erased,
  );
  ringWebhookJobs(deps, row.webhook_jobs);
  return {
    dataset,
    deleted: {
      threads: row.threads,
      episodes: row.episodes,
      facts: row.facts,
      entities: row.entities,
    },
  };
}

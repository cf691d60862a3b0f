import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, dbTimestamp, dbTimestampSet, parsedRowsOf, toIso } from "../db/rows";
import { entities, episodes, facts, jobs, messages, threads } from "../db/schema";
import type { Deps } from "../deps";
import { EPISODE_COLUMNS, EpisodeRow, episodeRecord } from "../episodic/episodes";
import { FACT_COLUMNS, FactRow, factRecord } from "../semantic/facts";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";

/** Rows per statement while exporting: bounds memory whatever the dataset's size. */
export const EXPORT_PAGE_ROWS = 500;

/**
 * The whole dataset as the spec's export document, produced as JSON text chunks, one per page of
 * rows read (keyset pagination: each page is one statement), so a large dataset is never held in
 * memory, let alone twice. Order: threads by creation with their messages by sequence, episodes,
 * facts (live and superseded) and entities by creation. The pages are separate reads, so rows
 * written while an export runs may or may not appear in it.
 */
export async function* exportDataset(
  { deps, projectId }: ProjectContext,
  { dataset }: { dataset: string },
): AsyncGenerator<string> {
  const exportedAt = deps.clock.now().toISOString();
  yield `{"dataset":${JSON.stringify(dataset)},"exportedAt":"${exportedAt}","threads":[`;
  let state = THREADS_START;
  for await (const page of threadMessagePages(deps, projectId, dataset)) {
    const next = threadsChunk(state, page);
    state = next.state;
    yield next.chunk;
  }
  if (state.openThread !== null) yield "]}";

  yield '],"episodes":[';
  yield* jsonArrayItems(episodePages(deps, projectId, dataset), (row) => episodeRecord(row));
  yield '],"facts":[';
  yield* jsonArrayItems(factPages(deps, projectId, dataset), (row) => {
    const { relevanceScore: _, ...fact } = factRecord(row);
    return fact;
  });
  yield '],"entities":[';
  yield* jsonArrayItems(entityPages(deps, projectId, dataset), (row) => ({ name: row.name, type: row.type }));
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
        tags: row.tags,
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

const episodePages = (deps: Deps, projectId: string, dataset: string) =>
  pagesOf(
    deps,
    EpisodeRow.extend({ cursor: z.string() }),
    (after) => sql`
      SELECT ${EPISODE_COLUMNS}, created_at::text AS cursor
      FROM ${episodes} WHERE project_id = ${projectId} AND dataset = ${dataset}${after(sql`created_at`)}
      ORDER BY created_at, id LIMIT ${EXPORT_PAGE_ROWS}`,
  );

const factPages = (deps: Deps, projectId: string, dataset: string) =>
  pagesOf(
    deps,
    FactRow.extend({ cursor: z.string() }),
    (after) => sql`
      SELECT ${FACT_COLUMNS}, f.created_at::text AS cursor FROM ${facts} f
      WHERE f.project_id = ${projectId} AND f.dataset = ${dataset}${after(sql`f.created_at`, sql`f.id`)}
      ORDER BY f.created_at, f.id LIMIT ${EXPORT_PAGE_ROWS}`,
  );

const entityPages = (deps: Deps, projectId: string, dataset: string) =>
  pagesOf(
    deps,
    z.object({ id: z.string(), name: z.string(), type: z.string(), cursor: z.string() }),
    (after) => sql`
      SELECT id, name, type, created_at::text AS cursor FROM ${entities}
      WHERE project_id = ${projectId} AND dataset = ${dataset}${after(sql`created_at`)}
      ORDER BY created_at, id LIMIT ${EXPORT_PAGE_ROWS}`,
  );

type After = (createdAt: SQL, id?: SQL) => SQL;

/**
 * Keyset pages over (created_at, id). The cursor is created_at as Postgres prints it, so it keeps
 * its microseconds (a JS Date would round them away and repeat or skip rows).
 */
async function* pagesOf<T extends { id: string; cursor: string }>(
  deps: Deps,
  row: z.ZodType<T>,
  page: (after: After) => SQL,
): AsyncGenerator<T[]> {
  let last: T | undefined;
  for (;;) {
    const cursor = last;
    const after: After = (createdAt, id = sql`id`) =>
      cursor ? sql` AND (${createdAt}, ${id}) > (${cursor.cursor}::timestamptz, ${cursor.id})` : sql``;
    const rows = parsedRowsOf(row, await deps.db.execute(page(after)));
    if (rows.length > 0) yield rows;
    if (rows.length < EXPORT_PAGE_ROWS) return;
    last = rows[rows.length - 1];
  }
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
});
type ThreadMessageRow = z.output<typeof ThreadMessageRow>;

/**
 * Threads with their messages, as one keyset walk over (thread created_at, thread id, seq); a
 * thread without messages is one row with a null seq (0 in the cursor: sequences start at 1).
 */
async function* threadMessagePages(deps: Deps, projectId: string, dataset: string) {
  let last: ThreadMessageRow | undefined;
  for (;;) {
    const after = last
      ? sql` AND t.created_at >= ${last.cursor}::timestamptz
             AND (t.created_at, t.id, coalesce(m.seq, 0)) > (${last.cursor}::timestamptz, ${last.thread_id}, ${last.seq ?? 0})`
      : sql``;
    const rows = parsedRowsOf(
      ThreadMessageRow,
      await deps.db.execute(sql`
        SELECT t.id AS thread_id, to_jsonb(t.tags) AS tags, t.created_at, t.created_at::text AS cursor,
          m.seq, m.role, m.content, m.created_at AS message_created_at
        FROM ${threads} t LEFT JOIN ${messages} m ON m.thread_id = t.id
        WHERE t.project_id = ${projectId} AND t.dataset = ${dataset}${after}
        ORDER BY t.created_at, t.id, m.seq NULLS FIRST LIMIT ${EXPORT_PAGE_ROWS}`),
    );
    if (rows.length > 0) yield rows;
    if (rows.length < EXPORT_PAGE_ROWS) return;
    last = rows[rows.length - 1];
  }
}

/**
 * Hard-erases the dataset in one statement (so one transaction on every driver): threads (their
 * messages cascade), episodes, facts (their entity links cascade), entities and the dataset's
 * pending jobs. Work already running for the dataset finds its rows gone and writes nothing: its
 * final write is conditional on the episode it claimed.
 */
export async function eraseDataset({ deps, projectId }: ProjectContext, { dataset }: { dataset: string }) {
  const scope = (table: typeof threads | typeof episodes | typeof facts | typeof entities | typeof jobs) =>
    sql`${table.projectId} = ${projectId} AND ${table.dataset} = ${dataset}`;
  const [row] = parsedRowsOf(
    z.object({ threads: dbInt, episodes: dbInt, facts: dbInt, entities: dbInt, webhook_jobs: z.unknown() }),
    await deps.db.execute(sql`
      WITH t AS (DELETE FROM ${threads} WHERE ${scope(threads)} RETURNING 1),
        e AS (DELETE FROM ${episodes} WHERE ${scope(episodes)} RETURNING 1),
        f AS (DELETE FROM ${facts} WHERE ${scope(facts)} RETURNING 1),
        n AS (DELETE FROM ${entities} WHERE ${scope(entities)} RETURNING 1),
        j AS (DELETE FROM ${jobs} WHERE ${scope(jobs)} RETURNING 1),
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

import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbJson, dbTimestamp, parsedRowsOf, toDate } from "../db/rows";
import { messageSearch, messages, messageVectors, threads } from "../db/schema";
import type { Deps } from "../deps";
import type { JobResult } from "../jobs/registry";
import type { Job } from "../jobs/store";
import { embedOrRefuse } from "../llm/refused-inputs";
import { usageCollector } from "../usage/collector";
import { flushUsage, usageCteOf } from "../usage/sql";
import { aboveMarkSql, countThreadTermsCtes } from "./terms";
import { EMBED_DEBOUNCE_MS, EMBED_MAX_WAIT_MS } from "./write";

/** Messages embedded in one call (one batch per thread per debounce window; a backlog takes several). */
export const EMBED_BATCH = 256;

/**
 * What of a message is embedded: its first 2,000 characters (about 500 tokens, inside every
 * embedding model's input; a vector of a longer text says less about any one of its sentences).
 */
export const EMBED_INPUT_CHARS = 2_000;

/**
 * When a thread's messages are embedded: EMBED_DEBOUNCE_MS after its last write, but no later
 * than EMBED_MAX_WAIT_MS after the job was armed (a thread written to every second still gets
 * its batch). Null: now.
 */
export function embedDueAt(input: { now: Date; lastWriteAt: Date | null; armedAt: Date | null }): Date | null {
  const quiet = (input.lastWriteAt?.getTime() ?? 0) + EMBED_DEBOUNCE_MS;
  const cap = input.armedAt ? input.armedAt.getTime() + EMBED_MAX_WAIT_MS : quiet;
  const due = Math.min(quiet, cap);
  return due > input.now.getTime() ? new Date(due) : null;
}

/**
 * The `message-embed` job of a thread: once the thread is quiet (embedDueAt), its new messages
 * counted into the keyword statistics and up to EMBED_BATCH of them without a vector read in one
 * statement, one embedding call, one insert; a backlog runs again a debounce later. A provider
 * failure throws (the runner retries the job with backoff); the messages stay stored, counted
 * and searchable by keyword meanwhile.
 */
export async function messageEmbedJob(deps: Deps, job: Job): Promise<JobResult> {
  const threadId = String(job.payload.threadId);
  const [state] = parsedRowsOf(
    z.object({ last_message_at: dbTimestamp }),
    await deps.db.execute(sql`SELECT last_message_at FROM ${threads} WHERE id = ${threadId}`),
  );
  if (!state) return { next: "done" };
  const armed = typeof job.payload.armedAt === "string" ? toDate(job.payload.armedAt) : null;
  const now = deps.clock.now();
  const due = embedDueAt({ now, lastWriteAt: toDate(state.last_message_at), armedAt: armed });
  if (due) return { next: "later", runAt: due, ring: true };
  return embedNowJob(deps, job);
}

/**
 * A thread's `message-embed` job run now, whatever its debounce: one batch; a backlog runs again
 * a debounce later. The job's own handler once the thread is quiet, and what an episode's job
 * runs when it takes the thread's job over before summarising (lib/pipeline/stages.ts), so the
 * episode's messages get their vectors at the latest with it, under that job's lease.
 */
export async function embedNowJob(deps: Deps, job: Job): Promise<JobResult> {
  const more = await embedThreadMessages(deps, String(job.payload.threadId));
  return more
    ? { next: "later", runAt: new Date(deps.clock.now().getTime() + EMBED_DEBOUNCE_MS), ring: true }
    : { next: "done" };
}

const Pending = z.object({ id: z.string(), seq: z.number(), content: z.string() });

/**
 * The job's first statement, over a window of the thread's first EMBED_BATCH index rows above its
 * `embedded_seq` (./terms.ts): the window's uncounted rows counted, and its next batch read, the
 * window's messages without a vector, in sequence order, up to the first row the count skipped (a
 * deletion in flight holds it; if that rolls back, the next run counts it). Also the window's last
 * number (`window_end`), whether a skipped row stopped the batch (`stopped`), and the thread's
 * project and dataset (`scope`), which the call's ledger row names. Once the batch
 * is stored the mark moves to the window's end, or only to the batch's last number when stopped,
 * so it never passes a message left uncounted or unembedded. A message's sequence number is handed
 * out by the statement that inserts it, under its thread's row lock, so messages commit in sequence
 * order: nothing commits later below a number this statement has seen.
 */
export function countAndReadBatchSql(threadId: string): SQL {
  return sql`
    WITH ${countThreadTermsCtes(threadId, EMBED_BATCH)},
      skipped AS (SELECT min(seq) AS seq FROM above
        WHERE NOT terms_counted AND id NOT IN (SELECT message_id FROM counted))
    SELECT (SELECT json_agg(json_build_object('id', p.id, 'seq', p.seq, 'content', p.content) ORDER BY p.seq)
      FROM (SELECT a.id, a.seq, left(m.content, ${EMBED_INPUT_CHARS}) AS content
        FROM above a JOIN ${messages} m ON m.id = a.id
        WHERE NOT EXISTS (SELECT 1 FROM ${messageVectors} v WHERE v.message_id = a.id)
          AND a.seq < coalesce((SELECT seq FROM skipped), 2147483647)) p) AS pending,
      (SELECT max(seq) FROM above) AS window_end,
      (SELECT seq FROM skipped) IS NOT NULL AS stopped,
      (SELECT json_build_object('projectId', t.project_id, 'dataset', t.dataset) FROM ${threads} t
        WHERE t.id = ${threadId}) AS scope`;
}

/**
 * Counts the thread's new index rows into the keyword statistics, then embeds up to EMBED_BATCH
 * of its indexed messages that have no vector yet (in sequence order) and stores their vectors;
 * true when more remain, those written during the provider call included. The count rides in the
 * statement that reads the batch, before the provider is called, and a provider failure (or none
 * configured) counts the rest of the thread too (countPastWindow), so it leaves no message
 * uncounted past the job's run. A message the provider refuses (embedOrRefuse) is logged and
 * left without a vector, and the mark passes it. A message whose thread was deleted meanwhile gets
 * no vector (the insert joins its index row).
 */
export async function embedThreadMessages(deps: Deps, threadId: string): Promise<boolean> {
  const [row] = parsedRowsOf(
    z.object({
      pending: dbJson(z.array(Pending).nullable()),
      window_end: z.number().nullable(),
      stopped: z.boolean(),
      scope: dbJson(z.object({ projectId: z.string(), dataset: z.string() }).nullable()),
    }),
    await deps.db.execute(countAndReadBatchSql(threadId)),
  );
  const batch = row?.pending ?? [];
  // Where the mark may move once the batch is stored: the window's end, every row of it then
  // counted and embedded; only past the batch when a skipped row stopped it.
  const markTo = row?.stopped ? batch.at(-1)?.seq : (row?.window_end ?? undefined);
  if (markTo === undefined) return false;
  // A window whose rows were all done already (a run that outlived its lease did them): past it.
  if (batch.length === 0) return storeVectors(deps, threadId, [], markTo, null, true);
  // The thread's project and dataset as the batch was read: an erase of the dataset during the
  // provider call takes the thread, not what the call cost (the ledger keeps an erased dataset's
  // rows).
  const scope = row?.scope;
  if (!scope) return false;
  const usage = usageCollector();
  const meter = usage.meter("message_embedding");
  let vectors: (number[] | null)[];
  try {
    vectors = await embedOrRefuse(
      (texts) => deps.llm.embed(texts, meter),
      batch.map((m) => m.content),
    );
  } catch (err) {
    await flushUsage(deps, usage, scope);
    await countPastWindow(deps, threadId, row?.window_end ?? markTo);
    throw err;
  }
  const rows = batch.flatMap((m, i) => {
    const vector = vectors[i];
    if (vector) return [{ id: m.id, seq: m.seq, v: `[${vector.join(",")}]` }];
    deps.log.warn("message left without a vector: the embedding provider refused it, alone and by its head", {
      threadId,
      messageId: m.id,
      characters: m.content.length,
    });
    return [];
  });
  const chunk = deps.database.kind === "pglite" ? EMBEDDED_STORE_CHUNK : rows.length;
  // Every message refused: no vector to store, but the mark moves past them all the same.
  const parts = rows.length > 0 ? storeChunks(rows, chunk) : [[]];
  let more = false;
  for (const [i, part] of parts.entries()) {
    // A turn of the event loop first: the embedded database runs a statement synchronously, so
    // without it the parts would follow each other before any waiting request was even read.
    if (i > 0) await nextTurn();
    // The call is recorded with the first part; `more` is asked by the last.
    const recorded = i === 0 ? usageCteOf(usage, scope, deps.clock.now().toISOString()) : null;
    const last = i === parts.length - 1;
    more = await storeVectors(deps, threadId, part, last ? markTo : part[part.length - 1].seq, recorded, last);
  }
  return more;
}

/** A turn of the event loop: the embedded database runs a statement synchronously. */
const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Counts the thread's index rows above `after` into the keyword statistics, a window a statement
 * (EMBED_BATCH rows, as the job's own count), until the thread's last. For a run whose embedding
 * failed: the thread's mark then stays, so the next run counts the same window again, and rows past
 * it would wait for a working provider, forever without one (a keyword-only deployment's BM25
 * and common-term cut-off read statistics that stopped EMBED_BATCH rows into a thread). A row a
 * deletion holds is skipped as in the job's count; the run that embeds its window counts it.
 * Each failed run reads the rows above the mark again (counted ones are read, not counted): a
 * window a statement, on the job's backoff.
 */
export async function countPastWindow(deps: Deps, threadId: string, after: number): Promise<void> {
  for (let from = after; ; ) {
    // A turn of the event loop between windows, as between a batch's parts (storeVectors).
    await nextTurn();
    const [row] = parsedRowsOf(
      z.object({ window_end: z.number().nullable() }),
      await deps.db.execute(sql`
        WITH ${countThreadTermsCtes(threadId, EMBED_BATCH, sql`${from}`)}
        SELECT (SELECT max(seq) FROM above) AS window_end`),
    );
    if (row?.window_end == null) return;
    from = row.window_end;
  }
}

/**
 * How many vectors one statement stores on the embedded database: its statements run one at a
 * time, and inserting a vector into the HNSW index takes 1-3 ms there, so a batch of 256 in one
 * statement held every request back for up to 0.7 s while a thread's backlog drained. A server
 * runs other statements beside it, so there the batch is stored whole, in one round trip.
 */
export const EMBEDDED_STORE_CHUNK = 32;

/** `rows` in parts of at most `size`, in order. */
export function storeChunks<T>(rows: T[], size: number): T[][] {
  const step = Math.max(1, size);
  const parts: T[][] = [];
  for (let i = 0; i < rows.length; i += step) parts.push(rows.slice(i, i + step));
  return parts;
}

/**
 * Stores vectors of the thread's messages (in sequence order) and moves its mark to `markTo`
 * (never back); with `askMore`, answers whether an indexed message without a vector is left above
 * it. The thread's row first (`marked`, which the insert waits for), as a deletion of the thread
 * takes it before the index rows: this statement never holds a row a deletion waits for while it
 * waits for the thread. `more` also sees the messages written while the provider was called, so
 * the job runs once more for them (their write armed it again too: ./write.ts).
 */
async function storeVectors(
  deps: Deps,
  threadId: string,
  rows: { id: string; seq: number; v: string }[],
  markTo: number,
  recorded: SQL | null,
  askMore: boolean,
): Promise<boolean> {
  const more = askMore
    ? sql`EXISTS (SELECT 1 FROM (${aboveMarkSql(threadId, sql`${markTo}`)}) a
        WHERE NOT EXISTS (SELECT 1 FROM ${messageVectors} v WHERE v.message_id = a.id))`
    : sql`false`;
  const [stored] = parsedRowsOf(
    z.object({ more: z.boolean() }),
    await deps.db.execute(sql`
      WITH ${recorded ? sql`${recorded}, ` : sql``}marked AS (
        UPDATE ${threads} SET embedded_seq = greatest(embedded_seq, ${markTo})
        WHERE id = ${threadId} RETURNING id),
      stored AS (
        INSERT INTO ${messageVectors} (message_id, project_id, thread_id, dataset, created_at, embedding)
        SELECT s.message_id, s.project_id, s.thread_id, s.dataset, s.created_at, x.v::halfvec
        FROM jsonb_to_recordset(${JSON.stringify(rows.map(({ id, v }) => ({ id, v })))}::jsonb) AS x(id text, v text)
        JOIN ${messageSearch} s ON s.message_id = x.id
        WHERE EXISTS (SELECT 1 FROM marked)
        ON CONFLICT (message_id) DO NOTHING)
      SELECT ${more} AS more`),
  );
  return stored?.more ?? false;
}

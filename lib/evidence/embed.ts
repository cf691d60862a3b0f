import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbJson, dbTimestamp, parsedRowsOf, toDate } from "../db/rows";
import { messageSearch, messages, messageVectors, threads } from "../db/schema";
import type { Deps } from "../deps";
import type { JobResult } from "../jobs/registry";
import type { Job } from "../jobs/store";
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
 * The job's first statement: the thread's new index rows counted (./terms.ts), and its next batch
 * read: the indexed messages above its `embedded_seq` without a vector, in sequence order, up to
 * the first row the count skipped (a deletion in flight holds it; if that rolls back, the next run
 * counts it), so the mark, which moves to the batch's last number once its vectors are stored, never
 * passes a message left uncounted or unembedded. A message's sequence number is handed out by the
 * statement that inserts it, under its thread's row lock, so messages commit in sequence order:
 * nothing commits later below a number this statement has seen.
 */
export function countAndReadBatchSql(threadId: string): SQL {
  return sql`
    WITH ${countThreadTermsCtes(threadId)},
      skipped AS (SELECT min(seq) AS seq FROM above
        WHERE NOT terms_counted AND id NOT IN (SELECT message_id FROM counted))
    SELECT json_agg(json_build_object('id', p.id, 'seq', p.seq, 'content', p.content) ORDER BY p.seq) AS pending
    FROM (SELECT a.id, a.seq, left(m.content, ${EMBED_INPUT_CHARS}) AS content
      FROM above a JOIN ${messages} m ON m.id = a.id
      WHERE NOT EXISTS (SELECT 1 FROM ${messageVectors} v WHERE v.message_id = a.id)
        AND a.seq < coalesce((SELECT seq FROM skipped), 2147483647)
      ORDER BY a.seq LIMIT ${EMBED_BATCH}) p`;
}

/**
 * Counts the thread's new index rows into the keyword statistics, then embeds up to EMBED_BATCH
 * of its indexed messages that have no vector yet (in sequence order) and stores their vectors;
 * true when more remain, those written during the provider call included. The count rides in the
 * statement that reads the batch, before the provider is called, so a provider failure (or none
 * configured) leaves no message uncounted past the job's run. A message whose thread was deleted
 * meanwhile gets no vector (the insert joins its index row).
 */
export async function embedThreadMessages(deps: Deps, threadId: string): Promise<boolean> {
  const [row] = parsedRowsOf(
    z.object({ pending: dbJson(z.array(Pending).nullable()) }),
    await deps.db.execute(countAndReadBatchSql(threadId)),
  );
  const batch = row?.pending ?? [];
  if (batch.length === 0) return false;
  // The thread's project and dataset, read by the statement that records the call.
  const scope = {
    projectId: sql`(SELECT project_id FROM ${threads} WHERE id = ${threadId})`,
    dataset: sql`(SELECT dataset FROM ${threads} WHERE id = ${threadId})`,
  };
  const usage = usageCollector();
  let vectors: number[][];
  try {
    vectors = await deps.llm.embed(
      batch.map((m) => m.content),
      usage.meter("message_embedding"),
    );
  } catch (err) {
    await flushUsage(deps, usage, scope);
    throw err;
  }
  const rows = batch.map((m, i) => ({ id: m.id, v: `[${vectors[i].join(",")}]` }));
  const lastSeq = batch[batch.length - 1].seq;
  const recorded = usageCteOf(usage, scope, deps.clock.now().toISOString());
  // The thread's row first (`marked`, which the insert waits for), as a deletion of the thread
  // takes it before the index rows: this statement never holds a row a deletion waits for while
  // it waits for the thread. `more` also sees the messages written while the provider was called:
  // their write found this job armed and did not arm it again, so the job runs once more for them.
  const [stored] = parsedRowsOf(
    z.object({ more: z.boolean() }),
    await deps.db.execute(sql`
      WITH ${recorded ? sql`${recorded}, ` : sql``}marked AS (
        UPDATE ${threads} SET embedded_seq = greatest(embedded_seq, ${lastSeq})
        WHERE id = ${threadId} RETURNING id),
      stored AS (
        INSERT INTO ${messageVectors} (message_id, project_id, thread_id, dataset, created_at, embedding)
        SELECT s.message_id, s.project_id, s.thread_id, s.dataset, s.created_at, x.v::halfvec
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(id text, v text)
        JOIN ${messageSearch} s ON s.message_id = x.id
        WHERE EXISTS (SELECT 1 FROM marked)
        ON CONFLICT (message_id) DO NOTHING)
      SELECT EXISTS (SELECT 1 FROM (${aboveMarkSql(threadId, sql`${lastSeq}`)}) a
        WHERE NOT EXISTS (SELECT 1 FROM ${messageVectors} v WHERE v.message_id = a.id)) AS more`),
  );
  return stored?.more ?? false;
}

import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbJson, dbTimestamp, parsedRowsOf, toDate } from "../db/rows";
import { messageSearch, messages, messageVectors, threads } from "../db/schema";
import type { Deps } from "../deps";
import type { JobResult } from "../jobs/registry";
import type { Job } from "../jobs/store";
import { usageCollector } from "../usage/collector";
import { flushUsage, usageCteOf } from "../usage/sql";
import { countThreadTermsCtes } from "./terms";
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

const Pending = z.object({ id: z.string(), content: z.string() });

/**
 * Counts the thread's new index rows into the keyword statistics, then embeds up to EMBED_BATCH
 * of its indexed messages that have no vector yet (oldest first) and stores their vectors; true
 * when more remain, those written during the provider call included. The count rides in the
 * statement that reads the batch, before the provider is called, so a provider failure (or none
 * configured) leaves no message uncounted past the job's run. A message whose thread was deleted
 * meanwhile gets no vector (the insert joins its index row).
 */
export async function embedThreadMessages(deps: Deps, threadId: string): Promise<boolean> {
  // The thread's index rows (`s`) whose message has no vector yet: the batch, and what remains.
  const unembedded = sql`s.thread_id = ${threadId}
    AND NOT EXISTS (SELECT 1 FROM ${messageVectors} v WHERE v.message_id = s.message_id)`;
  const [row] = parsedRowsOf(
    z.object({ pending: dbJson(z.array(Pending).nullable()) }),
    await deps.db.execute(sql`
      WITH ${countThreadTermsCtes(threadId)}
      SELECT json_agg(json_build_object('id', p.message_id, 'content', left(m.content, ${EMBED_INPUT_CHARS}))
        ORDER BY p.created_at, p.message_id) AS pending
      FROM (SELECT s.message_id, s.created_at FROM ${messageSearch} s WHERE ${unembedded}
        ORDER BY s.created_at, s.message_id LIMIT ${EMBED_BATCH + 1}) p
      JOIN ${messages} m ON m.id = p.message_id`),
  );
  const pending = row?.pending ?? [];
  const batch = pending.slice(0, EMBED_BATCH);
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
  const recorded = usageCteOf(usage, scope, deps.clock.now().toISOString());
  // `more` also sees the messages written while the provider was called: their write found this
  // job armed and did not arm it again, so the job runs once more for them instead of ending.
  const [stored] = parsedRowsOf(
    z.object({ more: z.boolean() }),
    await deps.db.execute(sql`
      WITH ${recorded ? sql`${recorded}, ` : sql``}stored AS (
        INSERT INTO ${messageVectors} (message_id, project_id, thread_id, dataset, created_at, embedding)
        SELECT s.message_id, s.project_id, s.thread_id, s.dataset, s.created_at, x.v::halfvec
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(id text, v text)
        JOIN ${messageSearch} s ON s.message_id = x.id
        ON CONFLICT (message_id) DO NOTHING)
      SELECT EXISTS (SELECT 1 FROM ${messageSearch} s WHERE ${unembedded}
          AND s.message_id NOT IN (SELECT jsonb_array_elements_text(${JSON.stringify(batch.map((m) => m.id))}::jsonb))) AS more`),
  );
  return stored?.more ?? false;
}

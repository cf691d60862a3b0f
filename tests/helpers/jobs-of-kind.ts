import { sql } from "drizzle-orm";
import { rowsOf } from "../../lib/db/rows";
import type { Deps } from "../../lib/deps";
import { EMBED_MAX_WAIT_MS } from "../../lib/evidence/write";
import { runJobByKey } from "../../lib/jobs/runner";

/**
 * Every indexed (user) message arms its thread's `message-embed` job (key `embed:<threadId>`,
 * lib/evidence/embed.ts), due 2 s after the thread's last write. Tests about other jobs leave it
 * out of their job lists with withoutMessageEmbed, or run it first with runMessageEmbedJob so
 * their run counts and model-call logs see only the work they are about.
 */
export const MESSAGE_EMBED = "message-embed";

export const messageEmbedKey = (threadId: string) => `embed:${threadId}`;

/** The jobs other than the message-embedding ones, in their order. */
export function withoutMessageEmbed<T extends { kind: string }>(jobs: T[]): T[] {
  return jobs.filter((j) => j.kind !== MESSAGE_EMBED);
}

/**
 * Runs a thread's message-embed job now and checks that it finished (it must be due: the clock
 * at least EMBED_DEBOUNCE_MS past the thread's last write); throws otherwise.
 */
export async function runMessageEmbedJob(deps: Deps, threadId: string): Promise<void> {
  const key = messageEmbedKey(threadId);
  if (!(await runJobByKey(deps, key))) throw new Error(`${key} was not due or does not exist`);
  const left = rowsOf<{ run_at: unknown }>(await deps.db.execute(sql`SELECT run_at FROM jobs WHERE key = ${key}`));
  if (left.length > 0) throw new Error(`${key} ran but did not finish (rescheduled to ${String(left[0].run_at)})`);
}

/**
 * Runs every waiting `message-embed` job now (the clock moves past the longest an armed job
 * waits, EMBED_MAX_WAIT_MS), so that what a test does next (a sweep it counts, a one-shot
 * provider fault, a lease it lets run out) meets only the work it is about: the conversation's
 * messages already have their vectors. Throws when one is left (a failed or unfinished job).
 * Returns how many ran.
 */
export async function embedWaitingMessages(deps: Deps, clock: { advance(ms: number): void }): Promise<number> {
  clock.advance(EMBED_MAX_WAIT_MS);
  const keys = async () =>
    rowsOf<{ key: string }>(
      await deps.db.execute(sql`SELECT key FROM jobs WHERE kind = ${MESSAGE_EMBED} ORDER BY key`),
    ).map((r) => r.key);
  let ran = 0;
  for (const key of await keys()) {
    if (!(await runJobByKey(deps, key))) throw new Error(`message-embed job ${key} was not due`);
    ran++;
  }
  const left = await keys();
  if (left.length > 0) throw new Error(`message-embed jobs left after running them: ${left.join(", ")}`);
  return ran;
}

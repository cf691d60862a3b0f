import { sql } from "drizzle-orm";
import { rowsOf } from "../db/rows";
import { episodes } from "../db/schema";
import type { Deps } from "../deps";
import type { JobHandler } from "../jobs/registry";
import { scheduleJobsSql } from "../jobs/schedule";
import { processSemantic, SEMANTIC_MAX_RETRIES } from "./extract";

/** Extraction pending this long with nobody claiming it has lost its job: the sweep queues one. */
const STALE_PENDING_MS = 5 * 60 * 1000;

/** The `semantic` job: extract the episode's facts again (a no-op unless extraction is pending). */
export const semanticJob: JobHandler = async (deps, job) => {
  await processSemantic(deps, String(job.payload.episodeId));
  return { next: "done" };
};

/**
 * The sweep's backstop for extraction (`retriedExtractions`): failed fact extraction goes back to
 * pending with its job due now, at most SEMANTIC_MAX_RETRIES times, a retry interval after the
 * failure; so does an extraction a dead worker left behind. One statement.
 */
export async function requeueFailedExtractions(deps: Deps, limit = 100): Promise<number> {
  const now = deps.clock.now().toISOString();
  const olderThan = new Date(Date.parse(now) - deps.config.retryIntervalMs).toISOString();
  const staleBefore = new Date(Date.parse(now) - STALE_PENDING_MS).toISOString();
  const from = sql`FROM requeued r`;
  const job = scheduleJobsSql({
    kind: "semantic",
    row: sql`r`,
    runAt: sql`${now}::timestamptz`,
    from,
    now,
    mode: "reschedule",
  });
  return rowsOf(
    await deps.db.execute(sql`
      WITH requeued AS (
        UPDATE ${episodes} e SET semantic_status = 'pending', semantic_retry_count = e.semantic_retry_count + 1,
          updated_at = ${now}::timestamptz
        WHERE e.id IN (
          SELECT id FROM ${episodes}
          WHERE status = 'completed' AND semantic_retry_count < ${SEMANTIC_MAX_RETRIES}
            AND ((semantic_status = 'failed' AND updated_at <= ${olderThan}::timestamptz)
              -- pending for long with nobody claiming it (its job went missing)
              OR (semantic_status = 'pending' AND updated_at <= ${staleBefore}::timestamptz)
              -- left behind by a worker that died: its lease ran out, or a restart released it
              OR (semantic_status = 'processing' AND (locked_until IS NULL OR locked_until < ${now}::timestamptz)))
          ORDER BY updated_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
        )
        RETURNING e.id, e.project_id, e.dataset
      )
      ${job}`),
  ).length;
}

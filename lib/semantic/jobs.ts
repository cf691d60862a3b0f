import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbTimestampSet, parsedRowsOf, rowsOf } from "../db/rows";
import { episodes } from "../db/schema";
import type { Deps } from "../deps";
import { dueJobsFrom, ringLater, scheduleJobsSql } from "../jobs/schedule";
import { SEMANTIC_MAX_RETRIES } from "./extract";

/**
 * The sweep's retry of fact extraction (`retriedExtractions`): a failed extraction goes back to
 * pending with its episode's job due now, at most SEMANTIC_MAX_RETRIES times, a retry interval
 * after the failure. One statement. An extraction a dead worker left in processing needs no
 * backstop: its episode's job is still there and is claimed again once its lease runs out.
 */
export async function requeueFailedExtractions(deps: Deps, limit = 100): Promise<number> {
  const now = deps.clock.now().toISOString();
  const olderThan = new Date(Date.parse(now) - deps.config.retryIntervalMs).toISOString();
  return rowsOf(await deps.db.execute(requeueExtractionsSql(now, failedExtractionsSql(olderThan, limit)))).length;
}

/**
 * The dashboard's retry of one failed extraction (an episode `completed` whose extraction
 * failed, which the /v1 retry does not take): past the retry cap too, as the /v1 retry is; the
 * attempt counts. One statement; false when the episode is not such a one.
 */
export async function retryExtraction({ deps, projectId }: ProjectContext, { episodeId }: { episodeId: string }) {
  const now = deps.clock.now().toISOString();
  const failed = sql`
    SELECT id FROM ${episodes}
    WHERE id = ${episodeId} AND project_id = ${projectId} AND status = 'completed' AND semantic_status = 'failed'
    FOR UPDATE`;
  const due = dueJobsFrom(
    parsedRowsOf(
      z.object({ key: z.string(), run_at: dbTimestampSet }),
      await deps.db.execute(requeueExtractionsSql(now, failed)),
    ),
  );
  ringLater(deps, due);
  return due.length > 0;
}

/** Extractions of the episodes `ids` selects back to pending, their episode's job due now. */
function requeueExtractionsSql(now: string, ids: SQL): SQL {
  const job = scheduleJobsSql({
    kind: "episode",
    row: sql`r`,
    runAt: sql`${now}::timestamptz`,
    from: sql`FROM requeued r`,
    now,
    mode: "reschedule",
  });
  // MATERIALIZED, as claimJobs' (lib/jobs/store.ts): a rescanned locking subquery goes past its limit.
  return sql`
    WITH picked AS MATERIALIZED (${ids}),
    requeued AS (
      UPDATE ${episodes} e SET semantic_status = 'pending', semantic_retry_count = e.semantic_retry_count + 1,
        updated_at = ${now}::timestamptz
      WHERE e.id IN (SELECT id FROM picked)
      RETURNING e.id, e.project_id, e.dataset
    )
    ${job}`;
}

/**
 * The failed extractions a retry is due for, oldest failure first, locked. Read through
 * `episodes_extraction_retry_idx` (failed rows only), so a sweep costs the failures, not the
 * completed episodes around them (every episode a project ever had).
 */
export function failedExtractionsSql(olderThan: string, limit: number): SQL {
  return sql`
    SELECT id FROM ${episodes}
    WHERE status = 'completed' AND semantic_status = 'failed' AND semantic_retry_count < ${SEMANTIC_MAX_RETRIES}
      AND updated_at <= ${olderThan}::timestamptz
    ORDER BY updated_at LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
}

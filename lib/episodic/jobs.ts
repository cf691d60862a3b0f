import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbNumber, dbTimestamp, parsedRowsOf, toDate } from "../db/rows";
import { projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import type { JobResult } from "../jobs/registry";
import type { Job } from "../jobs/store";
import { episodicSetting } from "../settings/sql";
import { cutEpisode, requeueFailedEpisodes, scheduleMissedIdleTimers } from "./triggers";

/**
 * The `thread-idle` job (the idle timer) fired: re-read the thread's last activity and settings.
 * Idle long enough (or pulled forward by a new sibling thread): cut the episode and run its job.
 * Otherwise sleep until the thread would be idle. Disabled meanwhile: drop the timer.
 */
export async function idleTimerJob(deps: Deps, job: Job): Promise<JobResult> {
  const threadId = String(job.payload.threadId);
  const [state] = parsedRowsOf(
    z.object({
      interval_ms: dbNumber.nullable(),
      enabled: z.boolean().nullable(),
      last_message_at: dbTimestamp,
      pending: z.boolean(),
    }),
    await deps.db.execute(sql`
      SELECT ${episodicSetting("autoEpisodeIntervalMs", sql`th.settings`, sql`p.settings`, "bigint")} AS interval_ms,
             ${episodicSetting("enabled", sql`th.settings`, sql`p.settings`, "boolean")} AS enabled,
             th.last_message_at, th.episode_due AS pending
      FROM ${threads} th JOIN ${projects} p ON p.id = th.project_id
      WHERE th.id = ${threadId}`),
  );
  if (!state?.enabled || !state.pending) return { next: "done" };
  const pulled = job.payload.pulled === true;
  if (!pulled) {
    if (state.interval_ms === null) return { next: "done" };
    const idleAt = new Date((toDate(state.last_message_at) as Date).getTime() + state.interval_ms);
    if (idleAt.getTime() > deps.clock.now().getTime()) {
      return { next: "later", runAt: idleAt, ring: true };
    }
  }
  const cut = await cutEpisode(deps, job.projectId ?? "", threadId, pulled ? "sibling" : "idle");
  return { next: "done", runNext: cut.job?.key };
}

/**
 * The sweep's backstops for episodes: failed episodes under their retry cap whose last failure
 * is a retry interval old go back to pending (`retried`), and idle threads whose timer went
 * missing get one (`backstop`).
 */
export const episodicBackstops = {
  retried: async (deps: Deps) =>
    (await requeueFailedEpisodes(deps, { olderThanMs: deps.config.retryIntervalMs, limit: 100 })).episodeIds.length,
  backstop: (deps: Deps) => scheduleMissedIdleTimers(deps, 500),
};

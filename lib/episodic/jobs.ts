import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbNumber, dbTimestamp, parsedRowsOf, toDate } from "../db/rows";
import { projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import type { JobHandler, JobResult } from "../jobs/registry";
import { type Job, LEASE_MS } from "../jobs/store";
import { episodicSetting } from "../settings/sql";
import { budgetRecheckAt } from "../usage/budget";
import { processEpisode } from "./pipeline";
import { cutEpisode, requeueFailedEpisodes, scheduleMissedIdleTimers } from "./triggers";

/**
 * The `episode` job: run `beforeSummary` (embedding the thread's messages, which the evidence
 * folder owns), summarise the episode, then run `afterSummary` (fact extraction, which the
 * semantic folder owns) in the same run. It is a no-op unless the episode is completed with
 * extraction pending, which is also the case when an earlier run of this job wrote the summary
 * and died before the facts.
 */
export function episodeJob(
  afterSummary: (deps: Deps, episodeId: string) => Promise<unknown>,
  beforeSummary?: (deps: Deps, episodeId: string) => Promise<void>,
): JobHandler {
  return async (deps, job) => {
    const episodeId = String(job.payload.episodeId);
    await beforeSummary?.(deps, episodeId);
    const outcome = await processEpisode(deps, episodeId);
    // In processing under another attempt whose lease holds: look again once it would have run out.
    if (outcome === "busy") return { next: "later", runAt: new Date(deps.clock.now().getTime() + LEASE_MS) };
    // Waiting for the project's token budget: looked at again a retry interval on (or at the
    // month's end), so a raised budget or a new month resumes it without anyone asking.
    if (outcome === "paused")
      return { next: "later", runAt: budgetRecheckAt(deps.clock.now(), deps.config.retryIntervalMs) };
    if (outcome !== "failed") await afterSummary(deps, episodeId);
    return { next: "done" };
  };
}

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
             th.last_message_at, th.last_seq > th.episode_seq AS pending
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

import { sql } from "drizzle-orm";
import { episodes, jobs } from "../db/schema";
import type { Deps } from "../deps";
import { jobKey } from "../jobs/kinds";
import { LEASE_MS, runJob } from "../jobs/runner";
import { scheduleJobsSql } from "../jobs/schedule";
import { claimJobs } from "../jobs/store";
import { episodeJobResult, runEpisodeStages, type StageOutcomes } from "./stages";

/**
 * Runs an episode's pending stages now, by hand (tests, benchmarks, tools), through its job as
 * any run does: the job is scheduled if it is missing (due now), claimed by key whatever its time,
 * and run under its lease. `busy`: another worker holds the job (that run does the work).
 */
export async function runEpisodeNow(deps: Deps, episodeId: string): Promise<StageOutcomes | "busy"> {
  const now = deps.clock.now();
  const at = now.toISOString();
  await deps.db.execute(
    scheduleJobsSql({
      kind: "episode",
      row: sql`ep`,
      runAt: sql`${at}::timestamptz`,
      from: sql`FROM ${episodes} ep WHERE ep.id = ${episodeId}`,
      now: at,
      mode: "keep",
    }),
  );
  const key = jobKey("episode", episodeId);
  const [job] = await claimJobs(deps.db, { now, leaseMs: LEASE_MS, limit: 1, key, early: true });
  if (!job) {
    const held = await deps.db.select({ key: jobs.key }).from(jobs).where(sql`${jobs.key} = ${key}`);
    return held.length > 0 ? "busy" : {};
  }
  let outcomes: StageOutcomes = {};
  await runJob(deps, job, async (d, j) => {
    outcomes = await runEpisodeStages(d, episodeId, j.claimedAt);
    return episodeJobResult(d, outcomes);
  });
  return outcomes;
}

/**
 * The summary stage run now (see runEpisodeNow), as its outcome; `skipped` when it was not pending
 * or was lost, `paused` when it is pending and the project's token budget is spent.
 */
export async function processEpisode(
  deps: Deps,
  episodeId: string,
): Promise<"completed" | "failed" | "skipped" | "busy" | "paused"> {
  const outcomes = await runEpisodeNow(deps, episodeId);
  if (outcomes === "busy") return "busy";
  if (outcomes.paused) return "paused";
  return outcomes.summary === "completed" || outcomes.summary === "failed" ? outcomes.summary : "skipped";
}

/** Fact extraction run now (see runEpisodeNow), as its outcome; `skipped` when it was not pending, busy or lost. */
export async function processSemantic(deps: Deps, episodeId: string): Promise<"completed" | "failed" | "skipped"> {
  const outcomes = await runEpisodeNow(deps, episodeId);
  if (outcomes === "busy" || outcomes.facts === undefined || outcomes.facts === "lost") return "skipped";
  return outcomes.facts;
}

import type { Deps } from "../deps";
import { type SummaryOutcome, summariseEpisode } from "../episodic/summary";
import { embedNowJob } from "../evidence/embed";
import { jobKey } from "../jobs/kinds";
import type { JobHandler, JobResult } from "../jobs/registry";
import { LEASE_MS, runJob } from "../jobs/runner";
import { claimJobs } from "../jobs/store";
import { extractFacts, type SemanticOutcome } from "../semantic/extract";
import { resolveProjectSettings, resolveThreadSettings } from "../settings/settings";
import { budgetRecheckAt } from "../usage/budget";
import { type ClaimedStage, claimNextStage, pausedByBudget } from "./claim";

/** What each stage a run reached came to (a stage not reached is absent). */
export interface StageOutcomes {
  summary?: SummaryOutcome;
  facts?: SemanticOutcome;
  /** The summary is pending and was not started: the project's monthly token budget is spent. */
  paused?: true;
}

/**
 * The `episode` job, the one owner of an episode's background work: it runs whichever stage is
 * pending (embed the thread's messages and summarise, then extract facts) under the job's lease,
 * each stage claimed with the run's stamp. Done whatever the stages came to: a failure is the
 * episode's (a retry policy queues the job again), a lost claim is the new owner's. Paused by
 * the project's token budget: the job looks again a retry interval on (or at the month's end if
 * sooner), so a raised budget or a new month resumes it without anyone asking.
 */
export const episodeJob: JobHandler = async (deps, job) => {
  return episodeJobResult(deps, await runEpisodeStages(deps, String(job.payload.episodeId), job.claimedAt));
};

/** What a run of the episode's job comes to: done, unless paused by the budget (then later). */
export function episodeJobResult(deps: Deps, outcomes: StageOutcomes): JobResult {
  if (outcomes.paused) return { next: "later", runAt: budgetRecheckAt(deps.clock.now(), deps.config.retryIntervalMs) };
  return { next: "done" };
}

/**
 * The stages of one episode for one run of its job (claimed at `claimedAt`): the summary if it is
 * pending, then extraction if the summary leaves it pending (or if it was already), each behind
 * its own claim. At most two claims, two stages. Nothing claimed at first and the episode still
 * pending: `paused` (its summary waits for the project's token budget).
 */
export async function runEpisodeStages(deps: Deps, episodeId: string, claimedAt: Date): Promise<StageOutcomes> {
  const outcomes: StageOutcomes = {};
  const stamp = claimedAt.toISOString();
  for (let stage = 0; stage < 2; stage++) {
    const claimed = await claimNextStage(deps, episodeId, stamp);
    if (!claimed) {
      if (stage === 0 && (await pausedByBudget(deps, episodeId))) outcomes.paused = true;
      break;
    }
    const settings = resolveThreadSettings(
      resolveProjectSettings(claimed.project_settings),
      claimed.thread_settings ?? undefined,
    );
    const transcript = claimed.transcript ?? [];
    if (claimed.stage === "facts") {
      const input = { ...claimed, transcript, user_names: claimed.user_names ?? [], settings, claimedAt: stamp };
      outcomes.facts = await extractFacts(deps, input);
      break;
    }
    await embedThreadMessages(deps, claimed);
    outcomes.summary = await summariseEpisode(deps, { ...claimed, transcript, settings, claimedAt: stamp });
    if (outcomes.summary !== "completed") break;
  }
  return outcomes;
}

/**
 * Before the summary, the thread's waiting embedding work, taken over through its job's lease:
 * the thread's `message-embed` job is claimed by key, even before its time (its debounce), and
 * run now under its lease (renewed, then completed or rescheduled as that job's own run would
 * be). Nothing waiting, or another worker holding the job (it embeds those messages): nothing
 * to do, so the same messages are never embedded twice. A failure is that job's (the runner
 * retries it with backoff); the summary goes on.
 */
async function embedThreadMessages(deps: Deps, episode: ClaimedStage): Promise<void> {
  const key = jobKey("message-embed", episode.thread_id);
  const [job] = await claimJobs(deps.db, { now: deps.clock.now(), leaseMs: LEASE_MS, limit: 1, key, early: true });
  if (job) await runJob(deps, job, embedNowJob);
}

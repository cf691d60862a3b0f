import type { Deps } from "../deps";
import type { JobKind } from "./kinds";
import type { Job } from "./store";

/** What a job's work leaves to do with its row: delete it (then maybe run another), or run it again later. */
export type JobResult =
  | { next: "done"; runNext?: string }
  // `ring`: ring the doorbell for the new time.
  | { next: "later"; runAt: Date; error?: string; ring?: boolean };

export type JobHandler = (deps: Deps, job: Job) => Promise<JobResult>;

/**
 * The background work of the service, filled by the folders that own it (episodic, semantic,
 * webhooks) where the service is put together (lib/background.ts): the runner knows jobs, not
 * what they do, so lib/jobs imports none of them.
 */
export interface JobRegistry {
  /** What runs a claimed job, by kind: every kind has one. */
  handlers: Record<JobKind, JobHandler>;
  /**
   * What each sweep runs before the due jobs, in order: work that lost its job (a failed
   * episode under its retry cap, a missed idle timer) gets one again. Each answers how many
   * rows it queued, reported under its name.
   */
  backstops: Record<string, (deps: Deps) => Promise<number>>;
}

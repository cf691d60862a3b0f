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
 * The background work of the service, filled by the folders that own it (pipeline, episodic,
 * evidence, webhooks) where the service is put together (lib/background.ts): the runner knows jobs, not
 * what they do, so lib/jobs imports none of them.
 */
export interface JobRegistry {
  /** What runs a claimed job, by kind: every kind has one. */
  handlers: Record<JobKind, JobHandler>;
  /**
   * What each sweep runs before the due jobs, in order: work queued again by a retry policy (a
   * failed episode or extraction under its retry cap) or whose timer went missing (an idle
   * thread). Work a dead worker left needs none: its job row is still there and claimed again
   * once the lease runs out. Each answers how many rows it queued, reported under its name.
   */
  backstops: Record<string, (deps: Deps) => Promise<number>>;
  /**
   * What each sweep deletes after the due jobs ran, in order: rows past their time. Each deletes
   * in bounded statements that read only the rows they delete, and answers how many went,
   * reported under its name.
   */
  cleanups: Record<string, (deps: Deps) => Promise<number>>;
}

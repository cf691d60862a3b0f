import pLimit from "p-limit";
import type { JobLane } from "./kinds";

/**
 * Job slots: at most `concurrency` pieces of work run at once, the rest wait for a slot in turn.
 * Once closed (the host shutting down), work still waiting never starts: it resolves undefined
 * at once when its turn comes. Work already running goes on to its end. A job skipped so is
 * still due in the jobs table, and the next sweep (the restart's) runs it.
 */
export interface JobSlots {
  <T>(work: () => Promise<T>): Promise<T | undefined>;
  close(): void;
}

export function jobSlots(concurrency: number): JobSlots {
  const limit = pLimit(concurrency);
  let closed = false;
  const slots = <T>(work: () => Promise<T>) => limit(() => (closed ? Promise.resolve(undefined) : work()));
  return Object.assign(slots, {
    close() {
      closed = true;
    },
  });
}

/** Each lane's slots (lib/jobs/kinds.ts): JOB_CONCURRENCY of them per lane. */
export type LaneSlots = Record<JobLane, JobSlots>;

export function laneSlots(concurrency: number): LaneSlots {
  return { work: jobSlots(concurrency), webhooks: jobSlots(concurrency) };
}

import { isTraceparent, type SpanOptions, telemetry, withSpan } from "../telemetry";
import type { Job } from "./store";

/** The payload field a job row carries its scheduler's trace context in (lib/jobs/schedule.ts). */
export const TRACEPARENT_FIELD = "traceparent";

/**
 * A job's span: a child of the span that scheduled it (a request, or the job before it), read
 * from the traceparent its row carries, so a trace follows a message from its request to the
 * episode and facts it led to. A row without one (scheduled by the sweep, or with tracing off)
 * starts its own trace.
 */
export function jobSpanOptions(job: Pick<Job, "kind" | "key" | "attempts" | "projectId" | "payload">): SpanOptions {
  const parent = job.payload[TRACEPARENT_FIELD];
  return {
    kind: "consumer",
    parent: isTraceparent(parent) ? parent : undefined,
    attributes: {
      "messaging.operation.type": "process",
      "job.kind": job.kind,
      "job.key": job.key,
      "job.attempts": job.attempts,
      "memory.project.id": job.projectId ?? undefined,
    },
  };
}

/** Runs a claimed job in its span when tracing is on. */
export function inJobSpan(job: Job, run: () => Promise<void>): Promise<void> {
  return telemetry().span ? withSpan(`job ${job.kind}`, jobSpanOptions(job), run) : run();
}

import { Client } from "@upstash/qstash";
import type { Clock } from "../clock";
import { errorFields, type Logger } from "../log";

/** A job that should run at `runAt`; ringing is a latency hint, never the truth (the jobs table is). */
export interface DueJob {
  key: string;
  runAt: Date;
  /**
   * Rung again for the same run after a worker released the job (its row armed again while it
   * ran, lib/jobs/schedule.ts `rearm`): when, so the ring is not deduplicated against the one
   * made at arming, which the job's callback had found held.
   */
  releasedAt?: Date;
}

export interface Doorbell {
  ring(jobs: DueJob[]): Promise<void>;
}

/** No doorbell: the sweep alone runs due jobs (edge without QStash credentials). */
export const silentDoorbell: Doorbell = { ring: async () => {} };

/**
 * Node.js: one timer per job key, replaced when the same key rings again. `run` claims and runs
 * the job through the job table, so a timer that fires twice or late does no harm.
 *
 * A timer that fires before the job's time by the clock waits the rest instead of running it.
 * Node.js counts a timer's delay from the event loop's time, which is read once per turn of the
 * loop. After a long synchronous stretch (the embedded database runs each statement so; one that
 * stores vectors can take most of a second), that time lags the clock, and a timer set then fires
 * early by as much. The claim then found the job not yet due, and nothing rang again: the job
 * waited for the sweep (RETRY_INTERVAL_MS, 2 minutes).
 */
export function timerDoorbell(clock: Clock, run: (key: string) => Promise<void>, log: Logger) {
  const timers = new Map<string, ReturnType<typeof setTimeout>>();
  // setTimeout's ceiling (~24.8 days); a later job is found by the sweep.
  const MAX_DELAY = 2_147_483_647;
  const arm = (job: DueJob) => {
    const delay = Math.max(0, job.runAt.getTime() - clock.now().getTime());
    if (delay > MAX_DELAY) return;
    clearTimeout(timers.get(job.key));
    const timer = setTimeout(() => {
      if (job.runAt.getTime() > clock.now().getTime()) return arm(job);
      timers.delete(job.key);
      run(job.key).catch((err) => log.error("job run failed", { key: job.key, ...errorFields(err) }));
    }, delay);
    timer.unref?.();
    timers.set(job.key, timer);
  };
  const doorbell: Doorbell & { stop(): void; pending(): number } = {
    async ring(jobs) {
      for (const job of jobs) arm(job);
    },
    stop() {
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
    },
    pending: () => timers.size,
  };
  return doorbell;
}

/** Where QStash delivers doorbells: the public origin (and any path prefix a proxy strips) + `/jobs/run`. */
export function jobCallbackUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl.replace(/\/+$/, "")}/jobs/run`;
}

/**
 * The deduplication id of one run of a job: its key and due time, so ringing the same run twice
 * (a retried publish, two requests racing) enqueues one message, while a rescheduled or retried
 * job (a new `run_at`) gets a new one, and so does a ring after its release (`releasedAt`): QStash
 * dropped that one as a duplicate of the ring whose delivery had found the job held, and the job
 * waited for the next minute's sweep. Kept to `[A-Za-z0-9_.-]` so it is a plain header value.
 */
export function deduplicationIdFor(job: DueJob): string {
  const released = job.releasedAt ? `.${job.releasedAt.getTime()}` : "";
  return `${job.key}.${job.runAt.getTime()}${released}`.replace(/[^A-Za-z0-9_.-]/g, "_");
}

/**
 * The longest delay every QStash plan accepts (7 days on the free plan, a year on pay-as-you-go).
 * A job due later (an idle timer set to weeks) is not rung: QStash would refuse the publish, and
 * the sweep, a minute's cron on the edge, runs it when it is due.
 */
export const QSTASH_MAX_DELAY_MS = 7 * 86_400_000;

/**
 * The edge: a QStash delayed message per job, delivered to `POST /jobs/run` (verified with the
 * signing keys there) no earlier than the job's `run_at`. Messages are deduplicated by QStash per
 * run ({@link deduplicationIdFor}). The Client uses the global `fetch`; `devMode: false` keeps a
 * stray `QSTASH_DEV` in the environment from swapping our credentials for the local dev server's.
 */
export function qstashDoorbell(options: {
  token: string;
  /** The QStash API (QSTASH_URL); QStash's own when absent. */
  baseUrl?: string;
  callbackUrl: string;
  clock: Clock;
  /** Deliveries QStash attempts again after a failed one (it backs off between them). */
  retries?: number;
}): Doorbell {
  const client = new Client({
    token: options.token,
    baseUrl: options.baseUrl ?? "https://qstash.upstash.io",
    devMode: false,
    // Network errors only (an HTTP error answer is not retried); the ring runs after the response,
    // and a lost ring costs latency, not work, so a short retry is enough.
    retry: { retries: 2, backoff: (attempt) => 100 * 2 ** attempt },
  });
  return {
    async ring(jobs) {
      const now = options.clock.now().getTime();
      await Promise.all(
        jobs
          .filter((job) => job.runAt.getTime() - now <= QSTASH_MAX_DELAY_MS)
          .map((job) =>
            client.publishJSON({
              url: options.callbackUrl,
              body: { key: job.key },
              // Unix seconds, rounded up so the delivery never comes before `run_at` (the claim
              // would find the job not yet due). A job already due is delivered at once.
              ...(job.runAt.getTime() > now ? { notBefore: Math.ceil(job.runAt.getTime() / 1000) } : {}),
              deduplicationId: deduplicationIdFor(job),
              retries: options.retries ?? 3,
            }),
          ),
      );
    },
  };
}

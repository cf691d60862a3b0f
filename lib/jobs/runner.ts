import { providerConfigured } from "../config";
import type { Deps } from "../deps";
import { failureText, NO_PROVIDER_MESSAGE } from "../errors";
import { heartbeat } from "../heartbeat";
import { errorFields, type Logger } from "../log";
import { observeJob } from "../telemetry";
import { isJobKind, JOB_LANES, type JobLane } from "./kinds";
import type { JobHandler, JobResult } from "./registry";
import { ringLater } from "./schedule";
import { inJobSpan } from "./span";
import { claimJobs, completeJob, type Job, LEASE_MS, LEASE_RENEW_MS, renewLease, rescheduleJob } from "./store";

export { LEASE_MS };
/** How many jobs one worker runs at once (provider latency bound, not CPU bound). */
export const JOB_CONCURRENCY = 16;

/**
 * Jobs a Worker invocation runs at once, per lane (model work, webhook deliveries; functions/index.ts),
 * fewer than the Node host's JOB_CONCURRENCY. Cloudflare lets an invocation hold 6 outgoing
 * connections, on every plan, and queues the rest: with 16 jobs each waiting on the provider,
 * their lease renewals (keepLease, a Neon request every 10 s) could wait behind them past the
 * lease, and another invocation would run the job again (the provider paid twice). 2 + 2 leave
 * two connections for the leases and the jobs' statements. QStash runs each job in an invocation
 * of its own; the cron sweep is the backstop.
 */
export const EDGE_JOB_CONCURRENCY = 2;
const FAILURE_BACKOFF_MS = 30_000;

/**
 * Runs one claimed job to its end: done, rescheduled, or (on an unexpected error) retried later.
 * Its lease is renewed while it runs, so a lease only runs out when the worker died. `handler`:
 * what to run instead of its kind's handler (a job whose work another job takes over now).
 */
export function runJob(deps: Deps, job: Job, handler?: JobHandler): Promise<void> {
  return inJobSpan(job, () => runJobUntraced(deps, job, handler));
}

async function runJobUntraced(deps: Deps, job: Job, handler?: JobHandler): Promise<void> {
  const lease = keepLease(deps, job);
  let result: JobResult;
  try {
    result = await observeJob(job.kind, () => (handler ? handler(deps, job) : work(deps, job)));
  } catch (err) {
    deps.log.error("job failed; it will run again", { key: job.key, attempts: job.attempts, ...errorFields(err) });
    const backoff = FAILURE_BACKOFF_MS * 2 ** Math.min(job.attempts - 1, 6);
    // Rung for its time: otherwise the retry waits for the sweep (RETRY_INTERVAL_MS, a minute's
    // cron on the edge), whatever the backoff says.
    const runAt = new Date(deps.clock.now().getTime() + backoff);
    // Stored and shown in the dashboard's jobs retrying: never a statement's parameters.
    result = { next: "later", runAt, error: failureText(err), ring: true };
  } finally {
    await lease.stop();
  }
  if (result.next === "later") {
    await rescheduleJob(deps.db, job, result.runAt, result.error).catch((err) =>
      // Its lease then runs out and the job is claimed again.
      deps.log.warn("could not reschedule a job", { key: job.key, ...errorFields(err) }),
    );
    if (result.ring) ringLater(deps, [{ key: job.key, runAt: result.runAt }]);
    return;
  }
  const armedAgain = await completeJob(deps.db, job);
  // Its doorbell, rung when it was armed, found it held.
  if (armedAgain) ringLater(deps, [{ key: job.key, runAt: armedAgain, releasedAt: deps.clock.now() }]);
  if (result.runNext) await runJobByKey(deps, result.runNext);
}

/** The job's handler from the registry; a kind nobody handles is dropped (run forever, it would fail forever). */
async function work(deps: Deps, job: Job): Promise<JobResult> {
  if (isJobKind(job.kind)) return deps.jobs.handlers[job.kind](deps, job);
  deps.log.error("unknown job kind; dropping it", { kind: job.kind, key: job.key });
  return { next: "done" };
}

/**
 * The heartbeat of a running job: every `LEASE_RENEW_MS` its lease is pushed a lease ahead.
 * `stop()` waits for a renewal in flight, so the job's row is then written with the lease it
 * really holds.
 */
export function keepLease(deps: Deps, job: Job, renewEveryMs = LEASE_RENEW_MS) {
  return heartbeat(
    renewEveryMs,
    async () => {
      const renewed = await renewLease(deps.db, job, deps.clock.now());
      if (renewed) job.lockedUntil = renewed;
      else deps.log.warn("job lost its lease (claimed again meanwhile)", { key: job.key });
      return renewed !== null;
    },
    (err) => deps.log.warn("job lease renewal failed", { key: job.key, ...errorFields(err) }),
  );
}

/** A doorbell for one job: claim it by key (no-op when not due or held by another worker) and run it. */
export async function runJobByKey(deps: Deps, key: string): Promise<boolean> {
  const [job] = await claimJobs(deps.db, { now: deps.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
  if (!job) return false;
  await runJob(deps, job);
  return true;
}

/**
 * Claims and runs every due job until none is due (or `max` ran): each lane (lib/jobs/kinds.ts)
 * in its own slots, JOB_CONCURRENCY at a time, so webhook deliveries waiting on slow receivers
 * never hold back the model work, nor it them. The lanes draw on one count of `max`.
 */
export async function runDueJobs(deps: Deps, max = 500): Promise<number> {
  const budget = { left: max };
  // Again while a round ran something: a job may queue one for the other lane (an episode's
  // webhook delivery) after that lane found nothing due.
  for (;;) {
    const ran = (await Promise.all(JOB_LANES.map((lane) => runLane(deps, lane, budget)))).reduce((a, b) => a + b, 0);
    if (ran === 0 || budget.left <= 0) return max - budget.left;
  }
}

async function runLane(deps: Deps, lane: JobLane, budget: { left: number }): Promise<number> {
  let ran = 0;
  const workers: Promise<void>[] = [];
  // Each worker claims a job only once it holds a slot of its lane (deps.jobSlots, shared with
  // the doorbell's runs), so a claimed job starts at once (its lease is short) and no more than
  // JOB_CONCURRENCY run in the lane; a slow job holds its own slot, not the others'. One worker
  // to begin with (an empty lane costs one claim), one more for each job found, up to
  // JOB_CONCURRENCY; a worker stops when it finds nothing due, and one whose job ended looks
  // again (the job may have queued another).
  const worker = async () => {
    while (budget.left > 0) {
      const claimed = await deps.jobSlots[lane](async () => {
        if (budget.left <= 0) return false;
        // Taken before the claim's round trip, so the other lane's workers see it at once.
        budget.left--;
        const [job] = await claimJobs(deps.db, { now: deps.clock.now(), leaseMs: LEASE_MS, limit: 1, lane });
        if (!job) {
          budget.left++;
          return false;
        }
        ran++;
        if (workers.length < JOB_CONCURRENCY) workers.push(worker());
        await runJob(deps, job);
        return true;
      });
      if (!claimed) return;
    }
  };
  workers.push(worker());
  // Workers started meanwhile are awaited too.
  for (let i = 0; i < workers.length; i++) await workers[i];
  return ran;
}

/**
 * How many rows each backstop queued and each cleanup deleted (by its name in the registry), and
 * jobs run (0 when they run in the background: their own line says how many once they ran).
 */
export interface SweepReport {
  [step: string]: number;
  ran: number;
}

/**
 * One sweep (cron every minute on the edge, an interval on Node.js): the registry's backstops
 * queue work again (failed episodes and extractions under their retry caps, missed idle timers),
 * then every due job runs (expired leases included: claiming takes them, so work a dead worker
 * left needs no backstop), then its cleanups delete what has outlived its time. A step that fails
 * is logged (`sweep step failed`, with its name) and counts 0; the others still run.
 */
export async function sweep(
  deps: Deps,
  { jobs = "await" }: { jobs?: "await" | "background" } = {},
): Promise<SweepReport> {
  // Without a provider every model step fails alike: one line for the sweep, not one per job.
  const quiet = providerConfigured(deps.config) ? undefined : withoutNoProviderLines(deps.log);
  if (quiet) deps = { ...deps, log: quiet.log };
  // Each step on its own: one that fails (its statement refused, a bug) is logged with its name,
  // and the steps after it still run (a failing backstop must not stop the cleanups).
  const step = async (name: string, run: (deps: Deps) => Promise<number>) => {
    try {
      return await run(deps);
    } catch (err) {
      deps.log.error("sweep step failed", { step: name, ...errorFields(err) });
      return 0;
    }
  };
  const queued: Record<string, number> = {};
  for (const [name, backstop] of Object.entries(deps.jobs.backstops)) queued[name] = await step(name, backstop);
  // "background" (the Node.js host's periodic sweep): the jobs run on in their slots while the
  // sweep ends, so a job stuck on a hung provider never holds back the next sweep's backstops.
  let ran = 0;
  if (jobs === "await") ran = await step("ran", runDueJobs);
  else deps.defer(runDueJobs(deps).then((n) => n > 0 && deps.log.info("sweep: due jobs ran", { ran: n })));
  const deleted: Record<string, number> = {};
  for (const [name, cleanup] of Object.entries(deps.jobs.cleanups)) deleted[name] = await step(name, cleanup);
  const report: SweepReport = { ...queued, ran, ...deleted };
  if (Object.values(report).some((n) => n > 0)) deps.log.info("sweep", report);
  if (quiet?.dropped()) {
    deps.log.warn(`${NO_PROVIDER_MESSAGE}. Background work failed for it in this sweep`, {
      failures: quiet.dropped(),
      ran,
    });
  }
  return report;
}

/** A logger that counts and drops the lines of failures for want of a provider (each has its error). */
function withoutNoProviderLines(log: Logger) {
  let dropped = 0;
  const keep =
    (write: Logger["warn"]): Logger["warn"] =>
    (message, fields) => {
      if (fields?.error === NO_PROVIDER_MESSAGE) dropped++;
      else write(message, fields);
    };
  return { log: { ...log, warn: keep(log.warn), error: keep(log.error) }, dropped: () => dropped };
}

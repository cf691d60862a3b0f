import { sql } from "drizzle-orm";
import { providerConfigured } from "../config";
import { rowsOf, toDate } from "../db/rows";
import { episodes, jobs, projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import { processEpisode } from "../episodic/pipeline";
import { cutEpisode, requeueFailedEpisodes, ringLater } from "../episodic/triggers";
import { heartbeat } from "../heartbeat";
import { deleteExpiredKeys } from "../idempotency";
import { NO_PROVIDER_MESSAGE } from "../llm/client";
import { errorFields, type Logger } from "../log";
import { processSemantic, SEMANTIC_MAX_RETRIES } from "../semantic/extract";
import { episodicSetting } from "../settings-sql";
import { deliverWebhook } from "../webhooks/deliver";
import { claimJobs, completeJob, type Job, LEASE_MS, LEASE_RENEW_MS, renewLease, rescheduleJob } from "./store";

export { LEASE_MS };
/** How many jobs one worker runs at once (provider latency bound, not CPU bound). */
export const JOB_CONCURRENCY = 16;
const FAILURE_BACKOFF_MS = 30_000;
/** Extraction pending this long with nobody claiming it has lost its job: the sweep queues one. */
const STALE_PENDING_MS = 5 * 60 * 1000;

/** What a job's work leaves to do with its row: delete it (then maybe run another), or run it again later. */
type JobResult =
  | { next: "done"; runNext?: string }
  // `ring`: ring the doorbell for the new time.
  | { next: "later"; runAt: Date; error?: string; ring?: boolean };

/**
 * Runs one claimed job to its end: done, rescheduled, or (on an unexpected error) retried later.
 * Its lease is renewed while it runs, so a lease only runs out when the worker died.
 */
export async function runJob(deps: Deps, job: Job): Promise<void> {
  const lease = keepLease(deps, job);
  let result: JobResult;
  try {
    result = await work(deps, job);
  } catch (err) {
    deps.log.error("job failed; it will run again", { key: job.key, attempts: job.attempts, ...errorFields(err) });
    const backoff = FAILURE_BACKOFF_MS * 2 ** Math.min(job.attempts - 1, 6);
    result = { next: "later", runAt: new Date(deps.clock.now().getTime() + backoff), error: String(err) };
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
  await completeJob(deps.db, job);
  if (result.runNext) await runJobByKey(deps, result.runNext);
}

async function work(deps: Deps, job: Job): Promise<JobResult> {
  switch (job.kind) {
    case "episode": {
      const episodeId = String(job.payload.episodeId);
      const outcome = await processEpisode(deps, episodeId);
      // In processing under another attempt whose lease holds: look again once it would have run out.
      if (outcome === "busy") return { next: "later", runAt: new Date(deps.clock.now().getTime() + LEASE_MS) };
      // Facts follow in the same run: a no-op unless the episode is completed with extraction
      // pending (also when an earlier run of this job wrote the summary and died before the facts).
      if (outcome !== "failed") await processSemantic(deps, episodeId);
      return { next: "done" };
    }
    case "semantic": {
      await processSemantic(deps, String(job.payload.episodeId));
      return { next: "done" };
    }
    case "thread-idle":
      return runIdleTimer(deps, job);
    case "webhook": {
      // One attempt of one delivery; its next attempt is this job again (lib/webhooks/deliver.ts).
      const retryAt = await deliverWebhook(deps, String(job.payload.deliveryId));
      return retryAt ? { next: "later", runAt: retryAt, ring: true } : { next: "done" };
    }
    default:
      deps.log.error("unknown job kind; dropping it", { kind: job.kind, key: job.key });
      return { next: "done" };
  }
}

/**
 * The heartbeat of a running job: every `LEASE_RENEW_MS` its lease (and its episode's) is pushed a
 * lease ahead. `stop()` waits for a renewal in flight, so the job's row is then written with the
 * lease it really holds.
 */
export function keepLease(deps: Deps, job: Job, renewEveryMs = LEASE_RENEW_MS) {
  const episodeId = typeof job.payload.episodeId === "string" ? job.payload.episodeId : undefined;
  return heartbeat(
    renewEveryMs,
    async () => {
      const renewed = await renewLease(deps.db, job, deps.clock.now(), episodeId);
      if (renewed) job.lockedUntil = renewed;
      else deps.log.warn("job lost its lease (claimed again meanwhile)", { key: job.key });
      return renewed !== null;
    },
    (err) => deps.log.warn("job lease renewal failed", { key: job.key, ...errorFields(err) }),
  );
}

/**
 * The idle timer fired: re-read the thread's last activity and settings. Idle long enough (or
 * pulled forward by a new sibling thread): cut the episode and run its job. Otherwise sleep until
 * the thread would be idle. Disabled meanwhile: drop the timer.
 */
async function runIdleTimer(deps: Deps, job: Job): Promise<JobResult> {
  const threadId = String(job.payload.threadId);
  const [state] = rowsOf<{
    interval_ms: string | number | null;
    enabled: boolean;
    last_message_at: unknown;
    pending: boolean;
  }>(
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
    const idleAt = new Date((toDate(state.last_message_at) as Date).getTime() + Number(state.interval_ms));
    if (idleAt.getTime() > deps.clock.now().getTime()) {
      return { next: "later", runAt: idleAt, ring: true };
    }
  }
  const cut = await cutEpisode(deps, job.projectId ?? "", threadId, pulled ? "sibling" : "idle");
  return { next: "done", runNext: cut.job?.key };
}

/** A doorbell for one job: claim it by key (no-op when not due or held by another worker) and run it. */
export async function runJobByKey(deps: Deps, key: string): Promise<boolean> {
  const [job] = await claimJobs(deps.db, { now: deps.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
  if (!job) return false;
  await runJob(deps, job);
  return true;
}

/** Claims and runs every due job, `JOB_CONCURRENCY` at a time, until none is due (or `max` ran). */
export async function runDueJobs(deps: Deps, max = 500): Promise<number> {
  let ran = 0;
  while (ran < max) {
    const batch = await claimJobs(deps.db, {
      now: deps.clock.now(),
      leaseMs: LEASE_MS,
      limit: Math.min(JOB_CONCURRENCY, max - ran),
    });
    if (batch.length === 0) break;
    await Promise.all(batch.map((job) => runJob(deps, job)));
    ran += batch.length;
  }
  return ran;
}

/**
 * The sleep-time backstop: threads whose idle time has passed with messages not yet in an episode
 * and no timer waiting (a lost doorbell, a crash before the timer was written) get a due timer.
 * Disabled together with the timer (null interval).
 */
async function scheduleMissedIdleTimers(deps: Deps, limit: number) {
  const now = deps.clock.now().toISOString();
  const interval = episodicSetting("autoEpisodeIntervalMs", sql`th.settings`, sql`p.settings`, "bigint");
  return rowsOf<{ key: string }>(
    await deps.db.execute(sql`
      INSERT INTO ${jobs} (id, kind, key, project_id, dataset, run_at, payload, created_at, updated_at)
      SELECT 'job_' || md5(th.id || ${now}), 'thread-idle', 'idle:' || th.id, th.project_id, th.dataset, ${now}::timestamptz,
        jsonb_build_object('threadId', th.id), ${now}::timestamptz, ${now}::timestamptz
      FROM ${threads} th JOIN ${projects} p ON p.id = th.project_id
      WHERE th.last_seq > th.episode_seq
        AND ${episodicSetting("enabled", sql`th.settings`, sql`p.settings`, "boolean")}
        AND ${interval} IS NOT NULL
        AND th.last_message_at + make_interval(secs => ${interval} / 1000.0) <= ${now}::timestamptz
        AND NOT EXISTS (SELECT 1 FROM ${jobs} j WHERE j.key = 'idle:' || th.id)
      LIMIT ${limit}
      ON CONFLICT (key) DO NOTHING
      RETURNING key`),
  ).length;
}

/**
 * Failed fact extraction goes back to pending with its job due now, at most SEMANTIC_MAX_RETRIES
 * times, a retry interval after the failure; so does an extraction a dead worker left behind.
 * One statement.
 */
async function requeueFailedExtractions(deps: Deps, limit: number) {
  const now = deps.clock.now().toISOString();
  const olderThan = new Date(Date.parse(now) - deps.config.retryIntervalMs).toISOString();
  const staleBefore = new Date(Date.parse(now) - STALE_PENDING_MS).toISOString();
  return rowsOf<{ key: string }>(
    await deps.db.execute(sql`
      WITH requeued AS (
        UPDATE ${episodes} e SET semantic_status = 'pending', semantic_retry_count = e.semantic_retry_count + 1,
          updated_at = ${now}::timestamptz
        WHERE e.id IN (
          SELECT id FROM ${episodes}
          WHERE status = 'completed' AND semantic_retry_count < ${SEMANTIC_MAX_RETRIES}
            AND ((semantic_status = 'failed' AND updated_at <= ${olderThan}::timestamptz)
              -- pending for long with nobody claiming it (its job went missing)
              OR (semantic_status = 'pending' AND updated_at <= ${staleBefore}::timestamptz)
              -- left behind by a worker that died: its lease ran out, or a restart released it
              OR (semantic_status = 'processing' AND (locked_until IS NULL OR locked_until < ${now}::timestamptz)))
          ORDER BY updated_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
        )
        RETURNING e.id, e.project_id, e.dataset
      )
      INSERT INTO ${jobs} (id, kind, key, project_id, dataset, run_at, payload, created_at, updated_at)
      SELECT 'job_' || md5(r.id || ${now} || 'semantic'), 'semantic', 'semantic:' || r.id, r.project_id, r.dataset,
        ${now}::timestamptz, jsonb_build_object('episodeId', r.id), ${now}::timestamptz, ${now}::timestamptz
      FROM requeued r
      ON CONFLICT (key) DO UPDATE SET run_at = EXCLUDED.run_at, locked_until = NULL, updated_at = EXCLUDED.updated_at
      RETURNING key`),
  ).length;
}

export interface SweepReport {
  retried: number;
  retriedExtractions: number;
  backstop: number;
  ran: number;
  /** Idempotency keys past their time, deleted (at most EXPIRED_KEYS_PER_SWEEP). */
  expiredKeys: number;
}

/** One bounded DELETE per sweep; a backlog drains over the next sweeps (expired keys are inert). */
const EXPIRED_KEYS_PER_SWEEP = 5000;

/**
 * One sweep (cron every minute on the edge, an interval on Node.js): re-queue failed episodes
 * under their retry cap whose last failure is a retry interval old, give idle threads a timer if
 * theirs went missing, then run every due job (expired leases included: claiming takes them), and
 * delete expired idempotency keys.
 */
export async function sweep(deps: Deps): Promise<SweepReport> {
  // Without a provider every model step fails alike: one line for the sweep, not one per job.
  const quiet = providerConfigured(deps.config) ? undefined : withoutNoProviderLines(deps.log);
  if (quiet) deps = { ...deps, log: quiet.log };
  const retried = (await requeueFailedEpisodes(deps, { olderThanMs: deps.config.retryIntervalMs, limit: 100 }))
    .episodeIds.length;
  const retriedExtractions = await requeueFailedExtractions(deps, 100);
  const backstop = await scheduleMissedIdleTimers(deps, 500);
  const ran = await runDueJobs(deps);
  const expiredKeys = await deleteExpiredKeys(deps, EXPIRED_KEYS_PER_SWEEP);
  if (retried || retriedExtractions || backstop || ran || expiredKeys) {
    deps.log.info("sweep", { retried, retriedExtractions, backstop, ran, expiredKeys });
  }
  if (quiet?.dropped()) {
    deps.log.warn(`${NO_PROVIDER_MESSAGE}. Background work failed for it in this sweep`, {
      failures: quiet.dropped(),
      ran,
    });
  }
  return { retried, retriedExtractions, backstop, ran, expiredKeys };
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

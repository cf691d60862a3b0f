import { type SQL, sql } from "drizzle-orm";
import { jsonOf, toDate } from "../db/rows";
import { jobs } from "../db/schema";
import type { Deps } from "../deps";
import { errorFields } from "../log";
import { currentTraceparent } from "../telemetry";
import type { DueJob } from "./doorbell";
import { JOB_KINDS, type JobKind, jobKeySql } from "./kinds";
import { TRACEPARENT_FIELD } from "./span";

/**
 * How scheduling treats a job already waiting under the same key:
 * - `keep`: leave it (a timer armed once, not pushed back by every message);
 * - `reschedule`: run at the new time, releasing a lease left by a worker that died (a retry);
 * - `replace`: a new job under the old key (new time and payload, attempts and error cleared);
 * - `takeOver`: leave a waiting one, but take over one a worker holds (new time and payload, its
 *   lease released): that worker may be ending it, and its completion or reschedule touches only
 *   a row it still holds, so what was scheduled meanwhile runs at its own time instead;
 * - `earlierOrTakeOver`: a waiting one runs at the earlier of the two times; one a worker holds
 *   (its own time has come) is taken over at the new time; both with the new payload's fields added.
 * - `rearm`: leave a waiting one; arm again one a worker holds, under its lease (new time and
 *   payload, attempts cleared: what marks it). That run goes on alone, and when it ends
 *   completeJob releases the row to run at the new time instead of deleting it: the work it may
 *   have missed is neither lost nor run beside it. Only the first arming counts until then.
 * - `replaceOrRearm`: `replace` a waiting one; arm again one a worker holds as `rearm` does (a
 *   webhook replayed while its attempt is in flight is sent once that attempt ends, not beside it).
 */
export type ScheduleMode =
  | "keep"
  | "reschedule"
  | "replace"
  | "takeOver"
  | "earlierOrTakeOver"
  | "rearm"
  | "replaceOrRearm";

/**
 * No worker holds the job at `now` (a timestamptz): it has no lease, or its lease ended before now.
 * A claim takes only such a row; `held` below is its complement at the scheduling statement's time.
 */
export const leaseFreeSql = (lockedUntil: SQL, now: SQL): SQL =>
  sql`(${lockedUntil} IS NULL OR ${lockedUntil} < ${now})`;

// A worker holds the job: its lease runs to now or later.
const held = sql`${jobs}.locked_until >= EXCLUDED.updated_at`;

const ON_CONFLICT: Record<ScheduleMode, SQL> = {
  keep: sql`DO NOTHING`,
  reschedule: sql`DO UPDATE SET run_at = EXCLUDED.run_at, locked_until = NULL, updated_at = EXCLUDED.updated_at`,
  replace: sql`DO UPDATE SET run_at = EXCLUDED.run_at, payload = EXCLUDED.payload, locked_until = NULL, attempts = 0,
    last_error = NULL, updated_at = EXCLUDED.updated_at`,
  takeOver: sql`DO UPDATE SET run_at = EXCLUDED.run_at, payload = EXCLUDED.payload, locked_until = NULL,
    updated_at = EXCLUDED.updated_at WHERE ${held}`,
  earlierOrTakeOver: sql`DO UPDATE SET
    run_at = CASE WHEN ${held} THEN EXCLUDED.run_at ELSE LEAST(${jobs}.run_at, EXCLUDED.run_at) END,
    payload = ${jobs}.payload || EXCLUDED.payload,
    locked_until = CASE WHEN ${held} THEN NULL ELSE ${jobs}.locked_until END, updated_at = EXCLUDED.updated_at`,
  rearm: sql`DO UPDATE SET run_at = EXCLUDED.run_at, payload = EXCLUDED.payload, attempts = 0,
    updated_at = EXCLUDED.updated_at WHERE ${held} AND ${jobs}.attempts > 0`,
  replaceOrRearm: sql`DO UPDATE SET run_at = EXCLUDED.run_at, payload = EXCLUDED.payload, attempts = 0,
    last_error = CASE WHEN ${held} THEN ${jobs}.last_error END,
    locked_until = CASE WHEN ${held} THEN ${jobs}.locked_until END, updated_at = EXCLUDED.updated_at`,
};

/** The columns of a job row, each an SQL expression over the rows of `from`. */
export interface JobRowsSql {
  kind: SQL;
  key: SQL;
  projectId: SQL;
  dataset: SQL;
  /** A timestamptz. */
  runAt: SQL;
  /** A jsonb object. */
  payload: SQL;
  /** `FROM … WHERE …` of the rows to schedule, one job each (empty: one row of constants). */
  from: SQL;
  /** The statement's time, for created_at and updated_at. */
  now: string;
  mode: ScheduleMode;
  /** Default `key, run_at` (what a doorbell needs). */
  returning?: SQL;
}

/**
 * The one statement that writes job rows: insert, or under an existing key act as `mode` says.
 * A fragment, so a caller folds it into the statement that makes the work (a CTE) and pays no
 * extra round trip. The id is random per row, so one statement may schedule many jobs.
 */
export function insertJobsSql(rows: JobRowsSql): SQL {
  return sql`
    INSERT INTO ${jobs} (id, kind, key, project_id, dataset, run_at, payload, created_at, updated_at)
    SELECT 'job_' || replace(gen_random_uuid()::text, '-', ''), ${rows.kind}, ${rows.key}, ${rows.projectId},
      ${rows.dataset}, ${rows.runAt}, ${rows.payload}, ${rows.now}::timestamptz, ${rows.now}::timestamptz
    ${rows.from}
    ON CONFLICT (key) ${ON_CONFLICT[rows.mode]}
    RETURNING ${rows.returning ?? sql`key, run_at`}`;
}

/** Jobs of one kind for the rows of `from`, each keyed by its row's id (see {@link JOB_KINDS}). */
export interface ScheduleJobs {
  kind: JobKind;
  /**
   * The alias of the rows in `from` (e.g. `ep`): `id` is each job's subject (its key, and its
   * payload's subject field), `project_id` and `dataset` are the job's.
   */
  row: SQL;
  /** Instead of the row's dataset (a webhook delivery has none). */
  dataset?: SQL;
  runAt: SQL;
  from: SQL;
  now: string;
  mode: ScheduleMode;
  /** Payload fields beside the subject (e.g. `{ pulled: true }`). */
  payload?: Record<string, string | number | boolean>;
  returning?: SQL;
}

/**
 * {@link insertJobsSql} for typed jobs: the key and payload follow from the kind and the row's id.
 * With tracing on, the payload also carries the active span's `traceparent`, so the job's span
 * continues the trace of the request (or job) that scheduled it (./span.ts); with it off the
 * statement is the same as without tracing.
 */
export function scheduleJobsSql(jobsOf: ScheduleJobs): SQL {
  const { kind, row, dataset, payload: beside, ...rest } = jobsOf;
  const traceparent = currentTraceparent();
  const payload = traceparent ? { ...beside, [TRACEPARENT_FIELD]: traceparent } : beside;
  const subject = sql`${row}.id`;
  const fields = sql`jsonb_build_object(${sql.raw(`'${JOB_KINDS[kind].subject}'`)}, ${subject})`;
  return insertJobsSql({
    ...rest,
    kind: sql`${kind}`,
    key: jobKeySql(kind, subject),
    projectId: sql`${row}.project_id`,
    dataset: dataset ?? sql`${row}.dataset`,
    payload: payload ? sql`${fields} || ${JSON.stringify(payload)}::jsonb` : fields,
  });
}

/** True when the job of `kind` for `subject` exists (a cheap probe before a speculative insert). */
export function jobExistsSql(kind: JobKind, subject: SQL): SQL {
  return sql`EXISTS (SELECT 1 FROM ${jobs} j WHERE j.key = ${jobKeySql(kind, subject)})`;
}

/** True when the job of `kind` for `subject` waits: it exists and no worker holds it at `now`. */
export function jobWaitingSql(kind: JobKind, subject: SQL, now: string): SQL {
  return sql`EXISTS (SELECT 1 FROM ${jobs} j WHERE j.key = ${jobKeySql(kind, subject)}
    AND ${leaseFreeSql(sql`j.locked_until`, sql`${now}::timestamptz`)})`;
}

/**
 * The jobs a CTE of the statement scheduled (its rows have `key` and `run_at`), as a JSON array
 * of `{key, runAt}` for {@link dueJobsFromJson}: select it as a column.
 */
export function dueJobsJson(cte: string): SQL {
  return sql`(SELECT coalesce(json_agg(json_build_object('key', key, 'runAt', run_at)), '[]'::json) FROM ${sql.identifier(cte)})`;
}

export function dueJobsFromJson(value: unknown): DueJob[] {
  const due = jsonOf<{ key: string; runAt: string }[] | null>((value ?? null) as never) ?? [];
  return due.map((j) => ({ key: j.key, runAt: toDate(j.runAt) as Date }));
}

export function dueJobsFrom(rows: { key: string; run_at: unknown }[]): DueJob[] {
  return rows.map((r) => ({ key: r.key, runAt: toDate(r.run_at) as Date }));
}

/**
 * Rings the doorbells of scheduled jobs after the response: a lost ring costs latency (the sweep
 * runs the job), never work. `then` says in the warning what the sweep will do instead.
 */
export function ringLater(deps: Deps, due: DueJob[], then = "run the job") {
  if (due.length === 0) return;
  deps.defer(
    deps.doorbell.ring(due).catch((err) => deps.log.warn(`doorbell failed; the sweep will ${then}`, errorFields(err))),
  );
}

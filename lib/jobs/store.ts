import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbInt, dbJson, dbTimestamp, dbTimestampSet, parsedRowsOf, toDate } from "../db/rows";
import { jobs } from "../db/schema";
import type { Db } from "../db/types";
import { type JobKind, type JobLane, laneSql } from "./kinds";
import { insertJobsSql, leaseFreeSql, type ScheduleMode } from "./schedule";

/**
 * The durable job table is the truth about background work; doorbells (timers, QStash) only make
 * a due job run on time, and the sweep runs whatever a lost doorbell missed. Rows are written by
 * one statement (./schedule.ts), claimed, renewed, completed and rescheduled here.
 */
export interface Job {
  id: string;
  /** A {@link JobKind}; a row of another kind (an older or newer version) is dropped when run. */
  kind: string;
  key: string;
  projectId: string | null;
  dataset: string | null;
  runAt: Date;
  attempts: number;
  lockedUntil: Date | null;
  payload: Record<string, unknown>;
  /**
   * The claim stamp: the time this run claimed the job (unlike its lease, never renewed). A
   * handler whose work spans statements passes it to the rows it owns and requires it on every
   * later write, so a run that outlived its lease writes nothing once the job was claimed again.
   */
  claimedAt: Date;
}

/** One job scheduled from JS (tests, tools): the key as given. */
export interface JobSpec {
  kind: JobKind;
  key: string;
  projectId: string;
  dataset: string;
  runAt: Date;
  payload?: Record<string, unknown>;
}

/**
 * How long a claim holds a job without a sign of life. A running job renews its lease every
 * `LEASE_RENEW_MS` (see `keepLease`), so a lease only runs out when its worker died; then the job
 * is claimed again, and its new run takes over the work (the claim stamp fences the old one).
 */
export const LEASE_MS = 30_000;
export const LEASE_RENEW_MS = 10_000;

/** A `jobs` row as raw SQL returns it (the columns of `JOB_COLUMNS`). */
const JobRow = z.object({
  id: z.string(),
  kind: z.string(),
  key: z.string(),
  project_id: z.string().nullable(),
  dataset: z.string().nullable(),
  run_at: dbTimestampSet,
  attempts: dbInt,
  locked_until: dbTimestamp,
  payload: dbJson(z.record(z.string(), z.unknown())),
});

function jobFromRow(row: z.output<typeof JobRow>): Omit<Job, "claimedAt"> {
  return {
    id: row.id,
    kind: row.kind,
    key: row.key,
    projectId: row.project_id,
    dataset: row.dataset,
    runAt: toDate(row.run_at) as Date,
    attempts: row.attempts,
    lockedUntil: toDate(row.locked_until),
    payload: row.payload,
  };
}

const JOB_COLUMNS = sql`id, kind, key, project_id, dataset, run_at, attempts, locked_until, payload`;

/** Schedules one job (a row not claimed: it has no claim stamp). */
export async function scheduleJob(
  db: Db,
  spec: JobSpec,
  mode: ScheduleMode,
  now: Date,
): Promise<Omit<Job, "claimedAt"> | null> {
  const statement = insertJobsSql({
    kind: sql`${spec.kind}`,
    key: sql`${spec.key}`,
    projectId: sql`${spec.projectId}`,
    dataset: sql`${spec.dataset}`,
    runAt: sql`${spec.runAt.toISOString()}::timestamptz`,
    payload: sql`${JSON.stringify(spec.payload ?? {})}::jsonb`,
    from: sql``,
    now: now.toISOString(),
    mode,
    returning: JOB_COLUMNS,
  });
  const [row] = parsedRowsOf(JobRow, await db.execute(statement));
  return row ? jobFromRow(row) : null;
}

/**
 * Claims due jobs in one statement: `FOR UPDATE SKIP LOCKED` so concurrent workers never take
 * the same row, and a lease (`locked_until`) so a crashed worker's job is claimed again once the
 * lease expires. `lane` narrows the claim to one lane's kinds, `key` to one job (a doorbell for
 * that job); with `early`, that job is claimed even before its time (another job taking its work
 * over now, under its lease). Each claimed job carries the claim's stamp (`now`).
 */
export async function claimJobs(
  db: Db,
  options: { now: Date; leaseMs: number; limit: number; key?: string; early?: boolean; lane?: JobLane },
): Promise<Job[]> {
  const now = options.now.toISOString();
  const lockedUntil = new Date(options.now.getTime() + options.leaseMs).toISOString();
  // MATERIALIZED: the locking SELECT runs once. As a plain `IN (subquery)` the planner may rescan
  // it for each row of jobs (a nested-loop semi-join, chosen when the statistics say the table
  // is tiny), and each rescan skips the rows the statement itself just leased and takes the next:
  // a claim of one leased several, and all but the first sat leased, unrun, for a lease.
  const result = await db.execute(sql`
    WITH due AS MATERIALIZED (
      SELECT id FROM ${jobs}
      WHERE ${options.key && options.early ? sql`TRUE` : sql`run_at <= ${now}::timestamptz`}
        AND ${leaseFreeSql(sql`locked_until`, sql`${now}::timestamptz`)}
        ${options.key ? sql`AND key = ${options.key}` : sql``}
        ${options.lane ? sql`AND ${laneSql(options.lane)}` : sql``}
      ORDER BY run_at
      LIMIT ${options.limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${jobs} SET locked_until = ${lockedUntil}::timestamptz, attempts = attempts + 1, updated_at = ${now}::timestamptz
    WHERE id IN (SELECT id FROM due)
    RETURNING ${JOB_COLUMNS}`);
  return parsedRowsOf(JobRow, result).map((row) => ({ ...jobFromRow(row), claimedAt: options.now }));
}

/**
 * How long until the job of this key is due, when no worker holds it (negative: overdue); null
 * when there is no such job, or a worker holds it.
 */
export async function msUntilDue(db: Db, key: string, now: Date): Promise<number | null> {
  const [row] = parsedRowsOf(
    z.object({ run_at: dbTimestampSet }),
    await db.execute(sql`
      SELECT run_at FROM ${jobs}
      WHERE key = ${key} AND ${leaseFreeSql(sql`locked_until`, sql`${now.toISOString()}::timestamptz`)}`),
  );
  return row ? (toDate(row.run_at) as Date).getTime() - now.getTime() : null;
}

/**
 * Done: delete the job, but only while our lease holds (a reclaimed job belongs to its new owner).
 * A job armed again while it ran (`rearm` in ./schedule.ts: a claim counts an attempt, so a held
 * row without one was armed again) is released instead, to run at the time it was armed for: that
 * time is returned, for its doorbell. The release is a statement of its own, so it reads an arming
 * that the delete waited for (the delete re-reads that row; a second CTE would not).
 */
export async function completeJob(db: Db, job: Job): Promise<Date | null> {
  const ours = sql`id = ${job.id} AND locked_until = ${job.lockedUntil?.toISOString() ?? null}::timestamptz`;
  const deleted = await db.execute(sql`DELETE FROM ${jobs} WHERE ${ours} AND attempts > 0 RETURNING id`);
  if (parsedRowsOf(z.object({ id: z.string() }), deleted).length > 0) return null;
  const [released] = parsedRowsOf(
    z.object({ run_at: dbTimestampSet }),
    await db.execute(sql`UPDATE ${jobs} SET locked_until = NULL WHERE ${ours} AND attempts = 0 RETURNING run_at`),
  );
  return released ? (toDate(released.run_at) as Date) : null;
}

/** Not yet (or failed): release the lease and run again at `runAt`. */
export async function rescheduleJob(db: Db, job: Job, runAt: Date, error?: string): Promise<void> {
  await db.execute(sql`
    UPDATE ${jobs} SET run_at = ${runAt.toISOString()}::timestamptz, locked_until = NULL,
      last_error = ${error ?? null}, attempts = ${error ? sql`attempts` : sql`0`}
    WHERE id = ${job.id} AND locked_until = ${job.lockedUntil?.toISOString() ?? null}::timestamptz`);
}

/**
 * A heartbeat: extend our lease on the job. Null when the lease is no longer ours (the job was
 * reclaimed or is gone). The job row is the only lease: what the job works on holds none.
 */
export async function renewLease(db: Db, job: Job, now: Date): Promise<Date | null> {
  const lockedUntil = new Date(now.getTime() + LEASE_MS).toISOString();
  const renewed = await db.execute(sql`
    UPDATE ${jobs} SET locked_until = ${lockedUntil}::timestamptz
    WHERE id = ${job.id} AND locked_until = ${job.lockedUntil?.toISOString() ?? null}::timestamptz
    RETURNING id`);
  return parsedRowsOf(z.object({ id: z.string() }), renewed).length > 0 ? new Date(lockedUntil) : null;
}

/**
 * At the start of the only process that may use a database (the embedded one, guarded by its
 * directory lock), every lease still held was held by a process that is gone: release them all,
 * so its jobs run again at once instead of a lease later. One statement.
 */
export async function releaseAllLeases(db: Db): Promise<{ jobs: number }> {
  const released = await db.execute(
    sql`UPDATE ${jobs} SET locked_until = NULL WHERE locked_until IS NOT NULL RETURNING id`,
  );
  return { jobs: parsedRowsOf(z.object({ id: z.string() }), released).length };
}

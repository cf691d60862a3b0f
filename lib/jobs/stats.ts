import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbInt, dbNumber, parsedRowsOf } from "../db/rows";
import { jobs } from "../db/schema";
import type { Db } from "../db/types";
import { JOB_KINDS } from "./kinds";
import { leaseFreeSql } from "./schedule";

/** The job queue of one kind, at one moment (the Prometheus scrape's). */
export interface JobQueueStats {
  kind: string;
  /** Rows waiting for a time still to come (idle timers, retries after a backoff). */
  scheduled: number;
  /** Rows due and not held by a worker: the backlog. */
  due: number;
  /** Rows held by a worker's live lease. */
  running: number;
  /** How long the oldest due row has been due, in seconds (0 when none is). */
  oldestDueSeconds: number;
}

const StatsRow = z.object({
  kind: z.string(),
  scheduled: dbInt,
  due: dbInt,
  running: dbInt,
  oldest_due_seconds: dbNumber,
});

/**
 * The queue by kind in one statement (a scan of the job table, which holds only work not yet done:
 * a finished job's row is deleted). Every known kind is reported, at zero when it has no row.
 */
export async function jobQueueStats(db: Db, now: Date): Promise<JobQueueStats[]> {
  const at = sql`${now.toISOString()}::timestamptz`;
  const free = leaseFreeSql(sql`locked_until`, at);
  const rows = parsedRowsOf(
    StatsRow,
    await db.execute(sql`
      SELECT kind,
        count(*) FILTER (WHERE run_at > ${at} AND ${free}) AS scheduled,
        count(*) FILTER (WHERE run_at <= ${at} AND ${free}) AS due,
        count(*) FILTER (WHERE NOT ${free}) AS running,
        coalesce(extract(epoch FROM ${at} - min(run_at) FILTER (WHERE run_at <= ${at} AND ${free})), 0)
          AS oldest_due_seconds
      FROM ${jobs} GROUP BY kind`),
  );
  return queueByKind(rows.map((r) => ({ ...r, oldestDueSeconds: r.oldest_due_seconds })));
}

/** Every known kind first (zeros when absent), then any other kind the table holds. */
export function queueByKind(rows: readonly JobQueueStats[]): JobQueueStats[] {
  const byKind = new Map(rows.map((r) => [r.kind, r]));
  const known = Object.keys(JOB_KINDS).map(
    (kind) => byKind.get(kind) ?? { kind, scheduled: 0, due: 0, running: 0, oldestDueSeconds: 0 },
  );
  const others = rows.filter((r) => !Object.hasOwn(JOB_KINDS, r.kind));
  return [...known, ...others].map(({ kind, scheduled, due, running, oldestDueSeconds }) => ({
    kind,
    scheduled,
    due,
    running,
    oldestDueSeconds,
  }));
}

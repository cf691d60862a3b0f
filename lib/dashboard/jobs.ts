import { sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, parsedRowsOf, toIso } from "../db/rows";
import { jobs } from "../db/schema";
import { conflict, notFound } from "../errors";
import { jobSubject } from "../jobs/kinds";
import { dueJobsFrom, leaseFreeSql, ringLater } from "../jobs/schedule";
import { projectFoundColumn, requireProject } from "../projects";

/**
 * A project's background jobs that failed and wait for their retry (a thread's message embeddings,
 * an episode's run, a webhook delivery), the latest attempt first: what the job works on, its
 * attempts, its error and when it runs again. A job that fails backs off up to 32 minutes, so
 * after a provider outage this is where an operator sees why vectors or episodes wait, and runs
 * them at once. One statement: the project check, the total and the page.
 */
export async function failingJobs({ deps, projectId }: ProjectContext, page: { limit: number; offset: number }) {
  const failing = sql`project_id = ${projectId} AND last_error IS NOT NULL`;
  const [row] = parsedRowsOf(
    z.object({ found: dbInt, total: dbInt, page: dbJson(z.array(FailingJobRow)) }),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)},
        (SELECT count(*) FROM ${jobs} WHERE ${failing})::int AS total,
        coalesce((SELECT json_agg(row_to_json(p) ORDER BY p.updated_at DESC, p.id DESC) FROM (
          SELECT id, kind, payload, dataset, attempts, last_error, run_at, updated_at, locked_until FROM ${jobs}
          WHERE ${failing} ORDER BY updated_at DESC, id DESC LIMIT ${page.limit} OFFSET ${page.offset}) p), '[]'::json) AS page`),
  );
  requireProject(row);
  const now = deps.clock.now().getTime();
  return { jobs: row.page.map((j) => failingJobRecord(j, now)), total: row.total };
}

/**
 * Runs a failing job now instead of at the end of its backoff: its due time is set to now and
 * its doorbell rung. 404 when it is gone (it ran and succeeded meanwhile) or has not failed (an
 * idle timer moved to now would end a live thread's episode early), 409 while it runs, and 404
 * Project not found for a project that does not exist. One statement.
 */
export async function retryJobNow({ deps, projectId }: ProjectContext, { jobId }: { jobId: string }) {
  const now = deps.clock.now().toISOString();
  const [row] = parsedRowsOf(
    z.object({ found: dbInt, job: dbJson(FailingJobRow.nullable()), running: z.boolean() }),
    await deps.db.execute(sql`
      WITH target AS (
        SELECT id, locked_until FROM ${jobs} WHERE id = ${jobId} AND project_id = ${projectId} AND last_error IS NOT NULL),
      moved AS (
        UPDATE ${jobs} SET run_at = ${now}::timestamptz
        WHERE id = (SELECT id FROM target)
          AND ${leaseFreeSql(sql`locked_until`, sql`${now}::timestamptz`)}
        RETURNING id, kind, key, payload, dataset, attempts, last_error, run_at, updated_at, locked_until)
      SELECT ${projectFoundColumn(projectId)}, (SELECT row_to_json(moved) FROM moved) AS job,
        EXISTS (SELECT 1 FROM target) AND NOT EXISTS (SELECT 1 FROM moved) AS running`),
  );
  requireProject(row);
  if (row.running) throw conflict("The job is running");
  if (!row.job?.key) throw notFound("Job not found");
  ringLater(deps, dueJobsFrom([{ key: row.job.key, run_at: row.job.run_at }]));
  return failingJobRecord(row.job, deps.clock.now().getTime());
}

const FailingJobRow = z.object({
  id: z.string(),
  kind: z.string(),
  key: z.string().optional(),
  payload: z.record(z.string(), z.unknown()),
  dataset: z.string().nullable(),
  attempts: z.number(),
  last_error: z.string().nullable(),
  run_at: z.string(),
  updated_at: z.string(),
  locked_until: z.string().nullable(),
});
type FailingJobRow = z.output<typeof FailingJobRow>;

function failingJobRecord(j: FailingJobRow, now: number) {
  return {
    jobId: j.id,
    kind: j.kind,
    // The thread (message embeddings, idle timer), episode or webhook delivery it works on.
    subject: jobSubject(j) ?? null,
    dataset: j.dataset,
    attempts: j.attempts,
    error: j.last_error,
    // Its last claim (the failed attempt), or a write that rescheduled it since.
    lastAttemptAt: toIso(j.updated_at),
    nextRunAt: toIso(j.run_at),
    running: j.locked_until !== null && Date.parse(j.locked_until) > now,
  };
}

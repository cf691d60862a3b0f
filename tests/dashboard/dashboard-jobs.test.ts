import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { EMBED_MAX_WAIT_MS } from "../../lib/evidence/write";
import { runDueJobs } from "../../lib/jobs/runner";
import type { ApiSchema } from "../helpers/api-types";
import { useDashboardService } from "../helpers/dashboard-fixtures";

/**
 * GET /dashboard/projects/:id/failing-jobs and POST .../failing-jobs/:jobId/retry: a job that
 * failed (here a thread's message embeddings, with the provider down) is listed with its error,
 * attempts and next run, and can be run now instead of at the end of its backoff.
 */
const { h, tenant, call, get, measured, expectError } = useDashboardService();

type FailingJob = ApiSchema<"FailingJob">;
const failing = (projectId: string) =>
  get<{ jobs: FailingJob[]; total: number }>(`/dashboard/projects/${projectId}/failing-jobs`);

describe("failing jobs", () => {
  it("lists a failed message-embedding job with its error and next run; retry runs it now", async () => {
    const t = await tenant("failing-jobs");
    const other = await tenant("failing-jobs-other");
    const threadId = await t.thread("ds");
    await t.say(threadId, "I moved to Lisbon last spring.");
    const otherThread = await other.thread("ds");
    await other.say(otherThread, "Someone else's words.");
    // Both threads' jobs fail: one attempt each, the call and the client's two retries.
    h.fake.fail({ status: 503, times: 6, endpoint: "embeddings" });
    h.clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(h.svc.deps);

    const m = await measured(`/dashboard/projects/${t.projectId}/failing-jobs`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2); // the session, then one statement
    const listed = JSON.parse(m.text) as { jobs: FailingJob[]; total: number };
    expect(listed.total).toBe(1);
    const [job] = listed.jobs;
    expect(job).toMatchObject({
      kind: "message-embed",
      subject: threadId,
      dataset: "ds",
      attempts: 1,
      running: false,
    });
    expect(job.error).toMatch(/503/);
    // Backed off: due 30 s after the attempt, not now.
    expect(Date.parse(job.nextRunAt ?? "")).toBe(h.clock.now().getTime() + 30_000);
    // Another project's failing job is its own.
    expect((await failing(other.projectId)).jobs.map((j) => j.subject)).toEqual([otherThread]);

    // Retry now: due at once and rung; run, it succeeds and is gone.
    h.svc.rings.length = 0;
    const retried = await call(`/dashboard/projects/${t.projectId}/failing-jobs/${job.jobId}/retry`, {
      method: "POST",
    });
    expect(retried.status).toBe(200);
    const { job: due } = (await retried.json()) as { job: FailingJob };
    expect(Date.parse(due.nextRunAt ?? "")).toBe(h.clock.now().getTime());
    await h.svc.settle();
    expect(h.svc.rings.map((r) => r.key)).toEqual([`embed:${threadId}`]);
    await runDueJobs(h.svc.deps);
    expect(await failing(t.projectId)).toEqual({ jobs: [], total: 0 });
    const [embedded] = rowsOf<{ n: number }>(
      await h.svc.deps.db.execute(
        sql`SELECT count(*)::int AS n FROM message_vectors v JOIN messages m ON m.id = v.message_id WHERE m.thread_id = ${threadId}`,
      ),
    );
    expect(Number(embedded.n)).toBe(1);

    await expectError(
      await call(`/dashboard/projects/${t.projectId}/failing-jobs/${job.jobId}/retry`, { method: "POST" }),
      404,
      "Job not found",
    );
    // The other project's job is not reachable through this project.
    const otherJob = (await failing(other.projectId)).jobs[0];
    await expectError(
      await call(`/dashboard/projects/${t.projectId}/failing-jobs/${otherJob.jobId}/retry`, { method: "POST" }),
      404,
      "Job not found",
    );
  });

  it("409 while the job runs; 404 for an unknown project; 401 without a session", async () => {
    const t = await tenant("failing-jobs-running");
    const threadId = await t.thread("ds");
    await t.say(threadId, "Hello there.");
    h.fake.fail({ status: 503, times: 3, endpoint: "embeddings" });
    h.clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(h.svc.deps);
    const [job] = (await failing(t.projectId)).jobs;
    await h.svc.deps.db.execute(
      sql`UPDATE jobs SET locked_until = ${new Date(h.clock.now().getTime() + 30_000).toISOString()}::timestamptz WHERE id = ${job.jobId}`,
    );
    expect((await failing(t.projectId)).jobs[0].running).toBe(true);
    await expectError(
      await call(`/dashboard/projects/${t.projectId}/failing-jobs/${job.jobId}/retry`, { method: "POST" }),
      409,
      "The job is running",
    );
    await expectError(await call("/dashboard/projects/prj_missing/failing-jobs"), 404, "Project not found");
    await expectError(
      await call(`/dashboard/projects/prj_missing/failing-jobs/${job.jobId}/retry`, { method: "POST" }),
      404,
      "Project not found",
    );
    // A job that has not failed (the thread's idle timer) is not run early: that would cut its
    // episode while the conversation goes on.
    const [idle] = rowsOf<{ id: string; run_at: string }>(
      await h.svc.deps.db.execute(sql`SELECT id, run_at::text FROM jobs WHERE key = ${`idle:${threadId}`}`),
    );
    await expectError(
      await call(`/dashboard/projects/${t.projectId}/failing-jobs/${idle.id}/retry`, { method: "POST" }),
      404,
      "Job not found",
    );
    const [after] = rowsOf<{ run_at: string }>(
      await h.svc.deps.db.execute(sql`SELECT run_at::text FROM jobs WHERE id = ${idle.id}`),
    );
    expect(after.run_at).toBe(idle.run_at);
    expect((await call(`/dashboard/projects/${t.projectId}/failing-jobs`, { token: null })).status).toBe(401);
  });
});

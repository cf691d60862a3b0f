import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createNodeService } from "../../functions/node";
import { rowsOf, toDate } from "../../lib/db/rows";
import type { Deps } from "../../lib/deps";
import { EMBED_DEBOUNCE_MS } from "../../lib/evidence/write";
import { keepLease, LEASE_MS, runDueJobs, runJob, runJobByKey, sweep } from "../../lib/jobs/runner";
import { claimJobs, completeJob, type JobSpec, rescheduleJob, scheduleJob } from "../../lib/jobs/store";
import { silentLogger } from "../../lib/log";
import { processEpisode } from "../../lib/pipeline/run";
import { gate, type Tenant, useEpisodicService } from "../helpers/episodic-fixtures";
import { runMessageEmbedJob } from "../helpers/jobs-of-kind";
import { testPgUrl } from "../helpers/test-database";

/**
 * Issue 3, the durable job table: scheduling upserts, exclusive claims with a lease, recovery of
 * a crashed worker's job, idempotency under duplicated doorbells, unexpected handler errors and
 * stale leases.
 */
const { h, tenant } = useEpisodicService();

const spec = (t: Tenant, key: string, runAt: Date, payload: Record<string, unknown> = {}): JobSpec => ({
  kind: "episode",
  key: `${t.projectId}:${key}`,
  projectId: t.projectId,
  dataset: "ds",
  runAt,
  payload,
});

/**
 * A thread with one message, ended: its episode is pending with its job due. The thread's
 * message-embed job (armed by the message, lib/evidence/embed.ts) runs first, so the jobs table
 * holds only the episode's job and the episode job's embedding step (taking the thread's
 * message-embed job over, lib/pipeline/stages.ts) finds no job waiting: it makes no model call.
 */
async function pendingEpisode(t: Tenant, content = "job words") {
  const threadId = await t.thread("ds");
  await t.say(threadId, content);
  h.clock.advance(EMBED_DEBOUNCE_MS);
  await runMessageEmbedJob(h.svc.deps, threadId);
  const { episodeId } = await t.end(threadId);
  return episodeId as string;
}

/**
 * The statements the episode job runs before it writes the summary: the claim of its summary
 * stage, then the claim of the thread's message-embed job (none waiting after pendingEpisode). A
 * failing database set up to skip them hits the summary's write. The claim is the job's first
 * statement: a database failing from the start fails it.
 */
const STATEMENTS_BEFORE_SUMMARY_WRITE = 2;

/**
 * Deps whose database, after `skip` statements, fails the next `times` ones (a dropped
 * connection), then recovers.
 */
function failingDb(deps: Deps, times: number, skip = 0): Deps {
  let passed = 0;
  let left = times;
  const db = new Proxy(deps.db, {
    get(target, prop) {
      if (prop === "execute" && passed >= skip && left > 0) {
        return async () => {
          left--;
          throw new Error("connection reset by peer");
        };
      }
      if (prop === "execute") passed++;
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { ...deps, db };
}

describe("job store", () => {
  it("schedules with an upsert per key: keep, earlier or replace", async () => {
    const t = await tenant();
    const now = h.clock.now();
    const at = (ms: number) => new Date(now.getTime() + ms);
    const db = h.svc.deps.db;

    const first = await scheduleJob(db, spec(t, "k", at(10_000), { n: 1 }), "keep", now);
    expect(first).toMatchObject({ key: `${t.projectId}:k`, runAt: at(10_000), attempts: 0, payload: { n: 1 } });
    expect(await scheduleJob(db, spec(t, "k", at(5_000), { n: 2 }), "keep", now)).toBeNull();
    expect(await t.jobs()).toMatchObject([{ runAt: at(10_000).toISOString(), payload: { n: 1 } }]);

    await scheduleJob(db, spec(t, "k", at(20_000)), "earlierOrTakeOver", now);
    expect((await t.jobs())[0].runAt).toBe(at(10_000).toISOString());
    await scheduleJob(db, spec(t, "k", at(3_000)), "earlierOrTakeOver", now);
    expect((await t.jobs())[0].runAt).toBe(at(3_000).toISOString());

    await scheduleJob(db, spec(t, "k", at(60_000), { n: 3 }), "replace", now);
    expect(await t.jobs()).toMatchObject([{ runAt: at(60_000).toISOString(), payload: { n: 3 }, attempts: 0 }]);
    expect(await t.jobs()).toHaveLength(1);
  });

  it("claims exclusively: two concurrent claims get disjoint jobs, and only due ones", async () => {
    const t = await tenant();
    const now = h.clock.now();
    for (let i = 0; i < 5; i++) await scheduleJob(h.svc.deps.db, spec(t, `c${i}`, now), "keep", now);
    await scheduleJob(h.svc.deps.db, spec(t, "later", new Date(now.getTime() + 1)), "keep", now);

    const claim = () => claimJobs(h.svc.deps.db, { now, leaseMs: LEASE_MS, limit: 3 });
    const [a, b] = await Promise.all([claim(), claim()]);
    const keysA = a.map((j) => j.key);
    const keysB = b.map((j) => j.key);
    expect(keysA.filter((k) => keysB.includes(k))).toEqual([]);
    expect([...keysA, ...keysB].sort()).toEqual([0, 1, 2, 3, 4].map((i) => `${t.projectId}:c${i}`).sort());
    for (const job of [...a, ...b]) {
      expect(job.attempts).toBe(1);
      expect(job.lockedUntil?.toISOString()).toBe(new Date(now.getTime() + LEASE_MS).toISOString());
    }
    // Everything due is leased: nothing left to claim.
    expect(await claim()).toEqual([]);
  });

  it("a claim of one leases one, whatever plan the statistics choose (they say the table holds one row)", async () => {
    const t = await tenant();
    const db = h.svc.deps.db;
    // Statistics of a one-row table: the planner then rescans a plain `IN (locking subquery)` for
    // each row of jobs, and each rescan took one more due job (a fresh-clone CI run's webhook
    // delivery left leased and unrun). The tests before this one are done with their jobs.
    await db.execute(sql`DELETE FROM jobs`);
    const now = h.clock.now();
    // Due in the order they are stored: each rescan's first unleased row is the next one scanned.
    const due = (i: number) => spec(t, `one${i}`, new Date(now.getTime() - 3 + i));
    await scheduleJob(db, due(0), "keep", now);
    await db.execute(sql`ANALYZE jobs`);
    for (const i of [1, 2]) await scheduleJob(db, due(i), "keep", now);
    const claimed = await claimJobs(db, { now, leaseMs: LEASE_MS, limit: 1 });
    expect(claimed.map((job) => job.key)).toEqual([`${t.projectId}:one0`]);
    const leased = rowsOf(await db.execute(sql`SELECT key FROM jobs WHERE locked_until IS NOT NULL`));
    expect(leased).toEqual([{ key: `${t.projectId}:one0` }]);
  });

  it("a completeJob or rescheduleJob with a stale lease leaves the new owner's job alone", async () => {
    const t = await tenant();
    const db = h.svc.deps.db;
    await scheduleJob(db, spec(t, "stale", h.clock.now()), "keep", h.clock.now());
    const key = `${t.projectId}:stale`;
    const [old] = await claimJobs(db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
    expect(old).toBeDefined();

    h.clock.advance(LEASE_MS + 1);
    const [owner] = await claimJobs(db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
    expect(owner).toMatchObject({ key, attempts: 2 });
    const held = await t.jobs();

    await completeJob(db, old);
    await rescheduleJob(db, old, new Date(h.clock.now().getTime() + 999_999), "late worker");
    expect(await t.jobs()).toEqual(held);
    expect(held[0].lockedUntil).toBe(owner.lockedUntil?.toISOString());

    await completeJob(db, owner);
    expect(await t.jobs()).toEqual([]);
  });

  it("rearm keeps a waiting job; one armed again while held is released when its run completes, at the new time", async () => {
    const t = await tenant();
    const db = h.svc.deps.db;
    const now = h.clock.now();
    const later = (ms: number) => new Date(now.getTime() + ms);
    const key = `${t.projectId}:rearmed`;
    await scheduleJob(db, spec(t, "rearmed", now, { n: 1 }), "rearm", now);
    await scheduleJob(db, spec(t, "rearmed", later(5000), { n: 2 }), "rearm", now);
    expect(await t.jobs()).toMatchObject([{ runAt: now.toISOString(), payload: { n: 1 } }]);

    const [run] = await claimJobs(db, { now, leaseMs: LEASE_MS, limit: 1, key });
    await scheduleJob(db, spec(t, "rearmed", later(2000), { n: 3 }), "rearm", now);
    await scheduleJob(db, spec(t, "rearmed", later(4000), { n: 4 }), "rearm", now); // the first arming counts
    // Still the run's, under the lease it took.
    expect(await t.jobs()).toMatchObject([{ lockedUntil: run.lockedUntil?.toISOString(), payload: { n: 3 } }]);
    expect(await completeJob(db, run)).toEqual(later(2000));
    expect(await t.jobs()).toMatchObject([{ runAt: later(2000).toISOString(), lockedUntil: null, attempts: 0 }]);

    // Its next run, not armed again, completes it.
    const [next] = await claimJobs(db, { now: later(2000), leaseMs: LEASE_MS, limit: 1, key });
    expect(next.payload).toMatchObject({ n: 3 });
    expect(await completeJob(db, next)).toBeNull();
    expect(await t.jobs()).toEqual([]);
  });

  it("runJobByKey runs nothing for a job that is not due or does not exist", async () => {
    const t = await tenant();
    const now = h.clock.now();
    await scheduleJob(h.svc.deps.db, spec(t, "future", new Date(now.getTime() + 1000)), "keep", now);
    expect(await runJobByKey(h.svc.deps, `${t.projectId}:future`)).toBe(false);
    expect(await runJobByKey(h.svc.deps, "no-such-key")).toBe(false);
    expect(await t.jobs()).toMatchObject([{ attempts: 0, lockedUntil: null }]);
  });
});

describe("runner", () => {
  it("recovers an expired lease: a worker that crashed before processing", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "crash before");
    const key = `episode:${episodeId}`;
    const [claimed] = await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
    expect(claimed.key).toBe(key);
    // ... and the worker dies here.

    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });
    h.clock.advance(LEASE_MS);
    expect((await sweep(h.svc.deps)).ran).toBe(0);
    expect((await t.episode(episodeId)).status).toBe("pending");

    h.clock.advance(1);
    expect((await sweep(h.svc.deps)).ran).toBe(1);
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "crash before" });
    expect((await t.jobs()).filter((j) => j.kind === "episode")).toEqual([]);
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
  });

  it("runs every sweep step when one fails: the failure is logged with its step's name, the rest still run", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "a step failed before");
    const lines: { message: string; fields?: Record<string, unknown> }[] = [];
    const capture = (message: string, fields?: Record<string, unknown>) => void lines.push({ message, fields });
    const { jobs } = h.svc.deps;
    const broken = async () => {
      throw new Error("statement refused");
    };
    const deps: Deps = {
      ...h.svc.deps,
      log: { ...silentLogger, error: capture },
      // A failing backstop first and a failing cleanup first: before, either stopped the sweep there.
      jobs: {
        ...jobs,
        backstops: { brokenBackstop: broken, ...jobs.backstops },
        cleanups: { brokenCleanup: broken, ...jobs.cleanups },
      },
    };
    const report = await sweep(deps);
    expect(report).toMatchObject({ brokenBackstop: 0, brokenCleanup: 0, ran: 1 });
    for (const name of [...Object.keys(jobs.backstops), ...Object.keys(jobs.cleanups)]) {
      expect(report[name], name).toEqual(expect.any(Number));
    }
    expect(lines.map((l) => [l.message, l.fields?.step, l.fields?.error])).toEqual([
      ["sweep step failed", "brokenBackstop", "statement refused"],
      ["sweep step failed", "brokenCleanup", "statement refused"],
    ]);
    expect((await t.episode(episodeId)).status).toBe("completed");
  });

  it("recovers an expired lease: a worker that crashed while the episode was processing", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "crash during");
    const key = `episode:${episodeId}`;
    await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
    // The worker moved the episode to processing, then died before writing anything else.
    await h.svc.deps.db.execute(sql`
      UPDATE episodes SET status = 'processing', processing_started_at = ${h.clock.now().toISOString()}::timestamptz
      WHERE id = ${episodeId}`);
    expect((await t.episode(episodeId)).status).toBe("processing");

    h.clock.advance(LEASE_MS + 1);
    expect((await sweep(h.svc.deps)).ran).toBe(1);
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "crash during" });
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
  });

  it("renews a running job's lease, the only lease, so no other worker takes it over; it ends with the lease it holds", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "long summary");
    const [job] = await claimJobs(h.svc.deps.db, {
      now: h.clock.now(),
      leaseMs: LEASE_MS,
      limit: 1,
      key: `episode:${episodeId}`,
    });
    const reached = gate();
    const hold = gate();
    h.fake.onStructured("episode_summary", async () => {
      reached.open();
      await hold.opened;
      return { summary: "the slow one", keyLearnings: [] };
    });
    // The episode's job run by hand under the claim above (its heartbeat is the test's, below).
    const first = h.svc.deps.jobs.handlers.episode(h.svc.deps, job);
    await reached.opened;
    const claimedLease = job.lockedUntil?.getTime();

    // A heartbeat every 20 ms of real time, renewing a lease ahead of the (manual) clock.
    const lease = keepLease(h.svc.deps, job, 20);
    h.clock.advance(LEASE_MS - 5_000);
    const renewedTo = h.clock.now().getTime() + LEASE_MS;
    await expect.poll(() => job.lockedUntil?.getTime(), { timeout: 5_000 }).toBe(renewedTo);
    const [row] = rowsOf<{ job: unknown; claimed_at: unknown }>(
      await h.svc.deps.db.execute(sql`
        SELECT (SELECT locked_until FROM jobs WHERE id = ${job.id}) AS job,
               (SELECT claimed_at FROM episodes WHERE id = ${episodeId}) AS claimed_at`),
    );
    expect(toDate(row.job)?.getTime()).toBe(renewedTo);
    // The episode holds no lease of its own: only the stamp of the run that claimed it.
    expect(toDate(row.claimed_at)?.getTime()).toBe(job.claimedAt.getTime());

    // Past the lease it was claimed with: still alive, so neither the claim nor the episode is taken.
    h.clock.advance(10_000);
    expect(h.clock.now().getTime()).toBeGreaterThan(claimedLease as number);
    expect(await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 10 })).toEqual([]);
    expect(await processEpisode(h.svc.deps, episodeId)).toBe("busy");

    await lease.stop();
    hold.open();
    expect(await first).toEqual({ next: "done" });
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "the slow one" });
    await completeJob(h.svc.deps.db, job);
    expect((await t.jobs()).filter((j) => j.kind === "episode")).toEqual([]);
  });

  const onServer = Boolean(testPgUrl());
  it(
    onServer
      ? "on a PostgreSQL server, a restarted host leaves a lease alone until it runs out (other hosts may share the database)"
      : "on the embedded host, releases at start every lease a dead process held: its work runs at once",
    async () => {
      const t = await tenant();
      const episodeId = await pendingEpisode(t, "left by the dead");
      await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key: `episode:${episodeId}` });
      await h.svc.deps.db.execute(sql`
      UPDATE episodes SET status = 'processing', processing_started_at = ${h.clock.now().toISOString()}::timestamptz,
        claimed_at = ${h.clock.now().toISOString()}::timestamptz
      WHERE id = ${episodeId}`);
      expect(await runDueJobs(h.svc.deps)).toBe(0); // held: nothing to run inside the lease

      // The process restarts on the same database (the directory lock says it is the only one; a
      // server's database may have other hosts, so their leases are left to run out).
      const restarted = await createNodeService({
        config: h.svc.deps.config,
        database: h.svc.deps.database,
        migrate: false,
        log: silentLogger,
        clock: h.clock,
        llm: h.svc.deps.llm,
        doorbell: { ring: async () => {} },
        sweepIntervalMs: false,
      });
      if (onServer) {
        expect(await runDueJobs(restarted.deps)).toBe(0);
        h.clock.advance(LEASE_MS + 1); // past the job's lease
      }
      expect(await runDueJobs(restarted.deps)).toBe(1);
      expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "left by the dead" });
    },
  );

  it("does not take over an episode another worker is still processing inside its lease", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "busy worker");
    const reached = gate();
    const hold = gate();
    h.fake.onStructured("episode_summary", async () => {
      reached.open();
      await hold.opened;
      return { summary: "first worker", keyLearnings: [] };
    });
    const first = processEpisode(h.svc.deps, episodeId);
    await reached.opened;
    h.clock.advance(LEASE_MS - 1);
    expect(await processEpisode(h.svc.deps, episodeId)).toBe("busy");
    hold.open();
    expect(await first).toBe("completed");
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "first worker" });
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
  });

  it("is idempotent under a duplicated doorbell: one episode, one summary call", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "rung twice");
    const key = `episode:${episodeId}`;
    const embeddingsBefore = h.fake.embeddingCalls().length; // the message's, in pendingEpisode
    h.fake.latencyMs = 20;
    const results = await Promise.all([runJobByKey(h.svc.deps, key), runJobByKey(h.svc.deps, key)]);
    expect(results.sort()).toEqual([false, true]);
    // A late third ring and a direct second run change nothing.
    expect(await runJobByKey(h.svc.deps, key)).toBe(false);
    expect(await processEpisode(h.svc.deps, episodeId)).toBe("skipped");
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "rung twice", retryCount: 0 });
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
    // One embedding call, the summary's (echoed from the transcript).
    expect(
      h.fake
        .embeddingCalls()
        .slice(embeddingsBefore)
        .map((c) => c.input),
    ).toEqual([["rung twice"]]);
    expect(await t.episodes()).toHaveLength(1);
  });

  it("a ring arriving while the job runs is a no-op", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "ring during run");
    const key = `episode:${episodeId}`;
    const reached = gate();
    const hold = gate();
    h.fake.onStructured("episode_summary", async () => {
      reached.open();
      await hold.opened;
      return { summary: "once", keyLearnings: [] };
    });
    const running = runJobByKey(h.svc.deps, key);
    await reached.opened;
    expect(await runJobByKey(h.svc.deps, key)).toBe(false);
    expect(await runDueJobs(h.svc.deps)).toBe(0);
    hold.open();
    expect(await running).toBe(true);
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
    expect((await t.episode(episodeId)).status).toBe("completed");
  });

  it("a duplicated idle doorbell cuts one episode", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.say(threadId, "idle twice");
    h.clock.advance(1_800_000);
    const key = `idle:${threadId}`;
    h.fake.latencyMs = 10;
    const results = await Promise.all([runJobByKey(h.svc.deps, key), runJobByKey(h.svc.deps, key)]);
    expect(results.sort()).toEqual([false, true]);
    expect(await t.episodes()).toMatchObject([{ status: "completed", message_count: 1 }]);
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
  });

  it("reschedules a job whose handler throws unexpectedly, with growing backoff, and runs it later", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "flaky database");
    const key = `episode:${episodeId}`;
    const claim = () => claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key });

    const [first] = await claim();
    const rung = h.svc.rings.length;
    await runJob(failingDb(h.svc.deps, 1), first);
    const afterFirst = (await t.jobs()).find((j) => j.key === key);
    expect(afterFirst).toMatchObject({
      runAt: new Date(h.clock.now().getTime() + 30_000).toISOString(),
      lockedUntil: null,
      attempts: 1,
      lastError: "connection reset by peer",
    });
    // Its doorbell rung for the retry's time, so the retry does not wait for the next sweep.
    expect(h.svc.rings.slice(rung)).toEqual([{ key, runAt: new Date(h.clock.now().getTime() + 30_000) }]);
    expect((await t.episode(episodeId)).status).toBe("pending");

    h.clock.advance(30_000);
    const [second] = await claim();
    expect(second.attempts).toBe(2);
    await runJob(failingDb(h.svc.deps, 1), second);
    expect((await t.jobs()).find((j) => j.key === key)).toMatchObject({
      runAt: new Date(h.clock.now().getTime() + 60_000).toISOString(),
      lockedUntil: null,
      attempts: 2,
    });

    h.clock.advance(60_000 - 1);
    expect(await runDueJobs(h.svc.deps)).toBe(0);
    h.clock.advance(1);
    expect(await runDueJobs(h.svc.deps)).toBe(1);
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "flaky database" });
    expect((await t.jobs()).filter((j) => j.kind === "episode")).toEqual([]);
  });

  it("an episode left in processing by a failed write is taken over by the job's next run, its only owner", async () => {
    const t = await tenant();
    const episodeId = await pendingEpisode(t, "lost write");
    const key = `episode:${episodeId}`;
    const [job] = await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key });
    // The claim goes through; the result write and the failure write both hit a dead connection.
    await runJob(failingDb(h.svc.deps, 2, STATEMENTS_BEFORE_SUMMARY_WRITE), job);
    expect((await t.episode(episodeId)).status).toBe("processing");
    expect((await t.jobs()).find((j) => j.key === key)).toMatchObject({
      runAt: new Date(h.clock.now().getTime() + 30_000).toISOString(),
      lockedUntil: null,
    });

    // The retry finds the episode still marked processing by that run, which has ended (it
    // rescheduled the job): holding the job's lease, the only lease, the retry takes it over at once.
    h.clock.advance(30_000 - 1);
    expect(await runDueJobs(h.svc.deps)).toBe(0);
    expect((await t.episode(episodeId)).status).toBe("processing");
    h.clock.advance(1);
    expect(await runDueJobs(h.svc.deps)).toBe(1);
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "lost write" });
    expect((await t.jobs()).filter((j) => j.kind === "episode")).toEqual([]);
  });

  it("drops a job of an unknown kind instead of running it forever", async () => {
    const t = await tenant();
    const now = h.clock.now();
    await scheduleJob(h.svc.deps.db, { ...spec(t, "odd", now), kind: "nonsense" as "episode" }, "keep", now);
    expect(await runDueJobs(h.svc.deps)).toBe(1);
    expect(await t.jobs()).toEqual([]);
  });

  it("runs every due job in one runDueJobs, beyond one batch", async () => {
    const t = await tenant();
    const ids = [];
    for (let i = 0; i < 10; i++) ids.push(await pendingEpisode(t, `many ${i}`));
    expect(await runDueJobs(h.svc.deps)).toBe(10);
    for (const id of ids) expect((await t.episode(id)).status).toBe("completed");
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(10);
  });

  it("runs at most `max` jobs in one runDueJobs, both lanes counted together", async () => {
    const t = await tenant();
    for (let i = 0; i < 6; i++) await pendingEpisode(t, `capped ${i}`);
    // Three webhook jobs in the other lane (their deliveries are gone: each ends at once).
    await h.svc.deps.db.execute(sql`
      INSERT INTO jobs (id, kind, key, project_id, run_at, payload)
      SELECT 'job_capped_' || i, 'webhook', 'webhook:whd_gone_' || i, ${t.projectId},
        ${h.clock.now().toISOString()}::timestamptz, jsonb_build_object('deliveryId', 'whd_gone_' || i)
      FROM generate_series(1, 3) i`);
    expect(await runDueJobs(h.svc.deps, 4)).toBe(4);
    expect(await runDueJobs(h.svc.deps)).toBe(5);
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(6);
  });
});

import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { idleTimerJob } from "../../lib/episodic/jobs";
import { PULL_FORWARD_MS } from "../../lib/episodic/triggers";
import { LEASE_MS, runDueJobs, sweep } from "../../lib/jobs/runner";
import { claimJobs, completeJob, rescheduleJob } from "../../lib/jobs/store";
import { patchProjectSettings } from "../../lib/settings/store";
import { type Episode, type Tenant, transcriptTexts, useEpisodicService } from "../helpers/episodic-fixtures";
import { runMessageEmbedJob, withoutMessageEmbed } from "../helpers/jobs-of-kind";
import { adminSession } from "../helpers/service";

/**
 * Issue 3, triggers: the idle timer (one job per thread, sleeping until the thread is idle), its
 * interval's precedence, null interval and `enabled: false`, explicit end, and the new-thread
 * pull-forward of waiting siblings. Jobs never run by themselves: the tests run them on the
 * manual clock with runDueJobs / sweep.
 */
const { h, tenant, iso, summaryCalls } = useEpisodicService();

const DEFAULT_INTERVAL = 1_800_000;
const MINUTE = 60_000;

const ringsFor = (key: string) => h.svc.rings.filter((r) => r.key === key).map((r) => r.runAt.toISOString());
const plus = (isoTime: string, ms: number) => new Date(Date.parse(isoTime) + ms).toISOString();
/**
 * The tenant's jobs without the threads' message-embed jobs (every user message arms one,
 * lib/evidence/embed.ts): these tests are about the idle timer and the episodes.
 */
const episodicJobs = async (t: Tenant) => withoutMessageEmbed(await t.jobs());

describe("idle timer", () => {
  it("schedules one job per thread at last message + interval; a second message does not reschedule it", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    const b = await t.thread("other");
    const m1 = await t.say(a, "first words");
    await h.svc.settle();
    const expected = plus(m1.createdAt, DEFAULT_INTERVAL);
    expect(await episodicJobs(t)).toEqual([
      {
        key: `idle:${a}`,
        kind: "thread-idle",
        runAt: expected,
        attempts: 0,
        lockedUntil: null,
        payload: { threadId: a },
        lastError: null,
      },
    ]);
    // The doorbell was rung for the job's time.
    expect(ringsFor(`idle:${a}`)).toEqual([expected]);

    h.clock.advance(5 * MINUTE);
    await t.say(a, "second words");
    await t.say(a, "third words");
    await h.svc.settle();
    const jobs = await episodicJobs(t);
    expect(jobs).toHaveLength(1);
    expect(jobs[0].runAt).toBe(expected);
    expect(ringsFor(`idle:${a}`)).toEqual([expected]);

    // Another thread gets its own timer.
    const mb = await t.say(b, "elsewhere");
    expect(Object.fromEntries((await episodicJobs(t)).map((j) => [j.key, j.runAt]))).toEqual({
      [`idle:${a}`]: expected,
      [`idle:${b}`]: plus(mb.createdAt, DEFAULT_INTERVAL),
    });
  });

  it("sleeps again until lastMessageAt + interval when it fires early, then cuts one episode of the new messages", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    const m1 = await t.say(a, "idle alpha");
    h.clock.advance(10 * MINUTE);
    // The thread's message embedding (due 2 s after m1) runs first: the counts below are the timer's.
    await runMessageEmbedJob(h.svc.deps, a);
    expect(h.fake.embeddingCalls().map((c) => c.input)).toEqual([["idle alpha"]]);
    const m2 = await t.say(a, "idle beta", "assistant");

    // The timer fires at m1 + interval: the thread has been idle for only 20 minutes.
    h.clock.advance(DEFAULT_INTERVAL - 10 * MINUTE);
    expect(await runDueJobs(h.svc.deps)).toBe(1);
    await h.svc.settle();
    expect(await t.episodes()).toEqual([]);
    const idleAt = plus(m2.createdAt, DEFAULT_INTERVAL);
    expect(await t.jobs()).toMatchObject([{ key: `idle:${a}`, runAt: idleAt, attempts: 0, lockedUntil: null }]);
    expect(ringsFor(`idle:${a}`)).toEqual([plus(m1.createdAt, DEFAULT_INTERVAL), idleAt]);

    // Not yet due.
    h.clock.set(new Date(Date.parse(idleAt) - 1));
    expect(await runDueJobs(h.svc.deps)).toBe(0);
    expect(await t.episodes()).toEqual([]);

    // Idle now: one episode of both messages, summarised in the same run.
    h.clock.advance(1);
    await runDueJobs(h.svc.deps);
    const [cut] = await t.episodes();
    expect(cut).toMatchObject({ thread_id: a, status: "completed", message_count: 2, metadata: { trigger: "idle" } });
    expect(await t.jobs()).toEqual([]);
    expect(summaryCalls("idle alpha").map(transcriptTexts)).toEqual([["idle alpha", "idle beta"]]);

    // The next message starts a new timer; when it fires, the episode holds only the new message.
    h.clock.advance(MINUTE);
    const m3 = await t.say(a, "idle gamma");
    expect(await episodicJobs(t)).toMatchObject([{ key: `idle:${a}`, runAt: plus(m3.createdAt, DEFAULT_INTERVAL) }]);
    h.clock.advance(DEFAULT_INTERVAL);
    await runDueJobs(h.svc.deps);
    const all = await t.episodes();
    expect(all).toHaveLength(2);
    expect(all[1]).toMatchObject({ status: "completed", message_count: 1, metadata: { trigger: "idle" } });
    expect(summaryCalls("idle gamma").map(transcriptTexts)).toEqual([["idle gamma"]]);
  });

  it("a message arriving while the timer's job ends (its episode cut) gets a timer of its own", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    await t.say(a, "race alpha");
    h.clock.advance(DEFAULT_INTERVAL);
    await runMessageEmbedJob(h.svc.deps, a);
    // A worker claims the timer and cuts the episode; before it deletes its row, a message comes.
    const [job] = await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key: `idle:${a}` });
    expect(await idleTimerJob(h.svc.deps, job)).toMatchObject({ next: "done" });
    // Within the worker's lease (LEASE_MS, renewed while it runs).
    h.clock.advance(1_000);
    const late = await t.say(a, "race beta");
    await completeJob(h.svc.deps.db, job);
    // Before: the message's statement saw the held timer and armed none, and the completion
    // deleted it; the sweep's backstop found the thread up to RETRY_INTERVAL_MS late.
    const timer = plus(late.createdAt, DEFAULT_INTERVAL);
    const timers = (await episodicJobs(t)).filter((j) => j.kind === "thread-idle");
    expect(timers).toMatchObject([{ key: `idle:${a}`, runAt: timer, lockedUntil: null, payload: { threadId: a } }]);
    expect(ringsFor(`idle:${a}`).at(-1)).toBe(timer);
    h.clock.set(new Date(timer));
    await runDueJobs(h.svc.deps);
    expect((await t.episodes()).map((e) => [e.message_count, e.metadata])).toEqual([
      [1, { trigger: "idle" }],
      [1, { trigger: "idle" }],
    ]);
  });

  it("takes the interval from the thread override, then the project setting, then the default", async () => {
    const t = await tenant();
    const admin = await adminSession(h.svc);
    const plain = await t.thread("d1");
    const overridden = await t.thread("d2", { autoEpisodeIntervalMs: 5000 });
    const p1 = await t.say(plain, "x");
    const o1 = await t.say(overridden, "x");
    expect(Object.fromEntries((await episodicJobs(t)).map((j) => [j.key, j.runAt]))).toEqual({
      [`idle:${plain}`]: plus(p1.createdAt, DEFAULT_INTERVAL),
      [`idle:${overridden}`]: plus(o1.createdAt, 5000),
    });

    const patched = await h.svc.request(`/dashboard/projects/${t.projectId}/settings`, {
      method: "PATCH",
      token: admin,
      json: { episodic: { autoEpisodeIntervalMs: 60_000 } },
    });
    expect(patched.status).toBe(200);

    const plain2 = await t.thread("d3");
    const overridden2 = await t.thread("d4", { autoEpisodeIntervalMs: 7000 });
    const p2 = await t.say(plain2, "x");
    const o2 = await t.say(overridden2, "x");
    const jobs = Object.fromEntries((await episodicJobs(t)).map((j) => [j.key, j.runAt]));
    expect(jobs).toEqual({
      // Already scheduled work keeps its time; the new interval applies to new timers.
      [`idle:${plain}`]: plus(p1.createdAt, DEFAULT_INTERVAL),
      [`idle:${overridden}`]: plus(o1.createdAt, 5000),
      [`idle:${plain2}`]: plus(p2.createdAt, 60_000),
      [`idle:${overridden2}`]: plus(o2.createdAt, 7000),
    });

    // A thread override of null is stripped: the project's value applies.
    const nulled = await t.thread("d5", { autoEpisodeIntervalMs: null });
    const n1 = await t.say(nulled, "x");
    expect((await episodicJobs(t)).find((j) => j.key === `idle:${nulled}`)?.runAt).toBe(plus(n1.createdAt, 60_000));

    // The override's interval drives the cut: 5 s later the overridden thread has an episode.
    h.clock.advance(5000);
    await runDueJobs(h.svc.deps);
    expect((await t.episodes()).map((e) => [e.thread_id, e.status])).toEqual([[overridden, "completed"]]);
  });

  it("with a null project interval, neither the timer nor the backstop fires; end still cuts", async () => {
    const t = await tenant();
    await patchProjectSettings(
      { deps: h.svc.deps, projectId: t.projectId },
      { episodic: { autoEpisodeIntervalMs: null } },
    );
    const a = await t.thread("ds");
    await t.conversation(a, ["null one", "null two"]);
    expect(await episodicJobs(t)).toEqual([]);

    h.clock.advance(30 * 24 * 60 * MINUTE);
    // The thread's message embedding runs first: the sweep below has only episodic work to find.
    await runMessageEmbedJob(h.svc.deps, a);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });
    expect(await t.jobs()).toEqual([]);
    expect(await t.episodes()).toEqual([]);

    // A thread override still turns the timer on for that thread.
    const b = await t.thread("ds2", { autoEpisodeIntervalMs: 2000 });
    const mb = await t.say(b, "override on");
    expect(await episodicJobs(t)).toMatchObject([{ key: `idle:${b}`, runAt: plus(mb.createdAt, 2000) }]);

    const ended = await t.end(a);
    expect(ended.episodeId).toEqual(expect.any(String));
    h.clock.advance(2000);
    await runDueJobs(h.svc.deps);
    const episodes = await t.episodes();
    expect(episodes.map((e) => [e.thread_id, e.status, e.message_count])).toEqual([
      [a, "completed", 2],
      [b, "completed", 1],
    ]);
  });

  it("the backstop gives an idle thread whose timer went missing a due timer", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    const m = await t.say(a, "lost timer words");
    // The doorbell and the job row are lost (a crash between the append and the timer).
    await h.svc.deps.db.execute(sql`DELETE FROM jobs WHERE key = ${`idle:${a}`}`);

    h.clock.set(new Date(Date.parse(m.createdAt) + DEFAULT_INTERVAL - 1));
    // The thread's message embedding (long due) runs first: the sweep's `ran` counts the timer's work.
    await runMessageEmbedJob(h.svc.deps, a);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });

    h.clock.advance(1);
    const report = await sweep(h.svc.deps);
    expect(report.backstop).toBe(1);
    expect(report.ran).toBeGreaterThanOrEqual(1);
    expect(await t.episodes()).toMatchObject([{ thread_id: a, status: "completed", metadata: { trigger: "idle" } }]);
    expect(await t.jobs()).toEqual([]);
    // Nothing new: the next sweep does nothing.
    h.clock.advance(DEFAULT_INTERVAL);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });
  });
});

describe("episodic enabled: false", () => {
  it("project-wide: messages are stored, but no timer, no episode on end, idle or a new sibling", async () => {
    const t = await tenant();
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { episodic: { enabled: false } });
    const a = await t.thread("ds");
    await t.conversation(a, ["off one", "off two"]);
    const list = await t.get(`/v1/memory/working/threads/${a}/messages`);
    expect(list.status).toBe(200);
    expect(((await list.json()) as { total: number }).total).toBe(2);
    const prepare = await t.get(`/v1/memory/working/threads/${a}/prepare`, { method: "POST" });
    expect(prepare.status).toBe(200);
    // Messages stay conversation evidence (indexed, embedded) with episodic memory off.
    expect((await t.jobs()).map((j) => j.key)).toEqual([`embed:${a}`]);

    expect((await t.end(a)).episodeId).toBeNull();
    await t.thread("ds");
    expect(await episodicJobs(t)).toEqual([]);
    h.clock.advance(2 * DEFAULT_INTERVAL);
    await runMessageEmbedJob(h.svc.deps, a);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });
    expect(await t.jobs()).toEqual([]);
    expect(await t.episodes()).toEqual([]);
    // The one model call is the user message's embedding: no summary, no episode embedding.
    expect(h.fake.requests.map((r) => [r.endpoint, r.body.input])).toEqual([["embeddings", ["off one"]]]);
  });

  it("per thread: the disabled thread makes nothing while its siblings work", async () => {
    const t = await tenant();
    const off = await t.thread("ds", { enabled: false });
    const on = await t.thread("ds2");
    await t.say(off, "quiet");
    await t.say(on, "loud");
    expect((await episodicJobs(t)).map((j) => j.key)).toEqual([`idle:${on}`]);
    // A new thread in its dataset does not pull the disabled thread forward either.
    await t.thread("ds");
    expect((await episodicJobs(t)).map((j) => j.key)).toEqual([`idle:${on}`]);
    expect((await t.end(off)).episodeId).toBeNull();
    expect((await t.end(on)).episodeId).toEqual(expect.any(String));
    await runDueJobs(h.svc.deps);
    expect((await t.episodes()).map((e) => e.thread_id)).toEqual([on]);
  });

  it("an end while the thread is disabled leaves its messages for the first episode once it is on", async () => {
    const t = await tenant();
    const a = await t.thread("ds", { enabled: false });
    await t.conversation(a, ["before one", "before two"]);
    expect((await t.end(a)).episodeId).toBeNull();
    const on = await t.get(`/v1/threads/${a}`, {
      method: "PATCH",
      json: { settings: { episodic: { enabled: true } } },
    });
    expect(on.status).toBe(200);
    await t.conversation(a, ["after three", "after four"]);
    const { episodeId } = await t.end(a);
    expect(await t.episode(episodeId as string)).toMatchObject({ messageCount: 4 });
  });

  it("disabling after the timer was scheduled drops the timer when it fires", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    await t.say(a, "soon disabled");
    expect(await episodicJobs(t)).toMatchObject([{ key: `idle:${a}` }]);
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { episodic: { enabled: false } });
    h.clock.advance(DEFAULT_INTERVAL);
    await runMessageEmbedJob(h.svc.deps, a);
    expect(await runDueJobs(h.svc.deps)).toBe(1);
    expect(await t.jobs()).toEqual([]);
    expect(await t.episodes()).toEqual([]);
  });
});

describe("POST /v1/threads/:id/end", () => {
  it("cuts an episode of the messages not yet in one; a repeat without new messages takes the whole thread again", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    const first = await t.conversation(a, ["end one", "end two", "end three"]);
    h.clock.advance(MINUTE);
    const e1 = await t.end(a);
    expect(e1).toEqual({ threadId: a, dataset: "ds", endedAt: iso(), episodeId: expect.stringMatching(/^epi_/) });
    await h.svc.settle();
    expect(ringsFor(`episode:${e1.episodeId}`)).toEqual([iso()]);

    const pending = await t.episode(e1.episodeId as string);
    expect(pending).toMatchObject({
      episodeId: e1.episodeId,
      threadId: a,
      dataset: "ds",
      projectId: t.projectId,
      status: "pending",
      messageCount: 3,
      startedAt: first[0].createdAt,
      endedAt: first[2].createdAt,
      processingStartedAt: null,
      processingCompletedAt: null,
      retryCount: 0,
      metadata: { trigger: "end" },
    });
    const thread = (await (await t.get(`/v1/threads/${a}`)).json()) as { endedAt: string };
    expect(thread.endedAt).toBe(e1.endedAt);

    h.clock.advance(MINUTE);
    const later = await t.conversation(a, ["end four", "end five"]);
    const e2 = await t.end(a);
    expect(await t.episode(e2.episodeId as string)).toMatchObject({
      status: "pending",
      messageCount: 2,
      startedAt: later[0].createdAt,
      endedAt: later[1].createdAt,
    });

    // Both summarised before the repeat (its episode would archive one still pending unsummarised).
    await runDueJobs(h.svc.deps);
    const e3 = await t.end(a);
    expect(new Set([e1.episodeId, e2.episodeId, e3.episodeId]).size).toBe(3);
    expect(await t.episode(e3.episodeId as string)).toMatchObject({
      status: "pending",
      messageCount: 5,
      startedAt: first[0].createdAt,
      endedAt: later[1].createdAt,
    });

    await runDueJobs(h.svc.deps);
    const texts = (id: string | null) => t.episode(id as string).then((e: Episode) => [e.status, e.summary]);
    // Summarised in turn; the repeat's episode then supersedes the two it covers (archived).
    expect(await texts(e1.episodeId)).toEqual(["archived", "end one end two end three"]);
    expect(await texts(e2.episodeId)).toEqual(["archived", "end four end five"]);
    expect(await texts(e3.episodeId)).toEqual(["completed", "end one end two end three end four end five"]);

    // The idle timer finds nothing new when it fires and makes no further episode.
    h.clock.advance(DEFAULT_INTERVAL);
    await runDueJobs(h.svc.deps);
    expect(await t.episodes()).toHaveLength(3);
    expect(await t.jobs()).toEqual([]);
  });

  it("on a thread without messages returns episodeId null and cuts nothing", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    expect(await t.end(a)).toEqual({ threadId: a, dataset: "ds", endedAt: iso(), episodeId: null });
    expect(await t.end(a)).toMatchObject({ episodeId: null });
    expect(await t.episodes()).toEqual([]);
    expect(await t.jobs()).toEqual([]);
  });

  it("404 for an unknown thread and for another tenant's thread", async () => {
    const t = await tenant();
    const other = await tenant("other");
    const theirs = await other.thread("ds");
    await other.say(theirs, "not yours");
    for (const id of ["thr_unknown", theirs]) {
      const res = await t.get(`/v1/threads/${id}/end`, { method: "POST" });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: "Thread not found" });
    }
    expect(await other.episodes()).toEqual([]);
  });
});

describe("a new thread pulls waiting siblings forward", () => {
  it("to at most 5 minutes, in the same dataset and project only", async () => {
    const t = await tenant();
    const other = await tenant("other");
    const a = await t.thread("ds");
    const elsewhere = await t.thread("other-ds");
    const foreign = await other.thread("ds");
    const ma = await t.say(a, "sibling words");
    const me = await t.say(elsewhere, "other dataset words");
    const mf = await other.say(foreign, "other project words");

    h.clock.advance(MINUTE);
    const b = await t.thread("ds");
    await h.svc.settle();
    const due = iso(PULL_FORWARD_MS);
    const jobs = Object.fromEntries((await episodicJobs(t)).map((j) => [j.key, j]));
    expect(Object.keys(jobs).sort()).toEqual([`idle:${a}`, `idle:${elsewhere}`].sort());
    expect(jobs[`idle:${a}`]).toMatchObject({ runAt: due, payload: { threadId: a, pulled: true } });
    expect(jobs[`idle:${elsewhere}`]).toMatchObject({
      runAt: plus(me.createdAt, DEFAULT_INTERVAL),
      payload: { threadId: elsewhere },
    });
    expect(await episodicJobs(other)).toMatchObject([
      { key: `idle:${foreign}`, runAt: plus(mf.createdAt, DEFAULT_INTERVAL) },
    ]);
    expect(ringsFor(`idle:${a}`)).toEqual([plus(ma.createdAt, DEFAULT_INTERVAL), due]);
    expect(ringsFor(`idle:${b}`)).toEqual([]);
    // The threads' message embeddings (due 2 s after their messages) run first.
    for (const thread of [a, elsewhere, foreign]) await runMessageEmbedJob(h.svc.deps, thread);

    h.clock.set(new Date(Date.parse(due) - 1));
    expect(await runDueJobs(h.svc.deps)).toBe(0);

    // Due: the sibling's episode is cut although it has been idle for only 6 minutes.
    h.clock.advance(1);
    await runDueJobs(h.svc.deps);
    expect(await t.episodes()).toMatchObject([{ thread_id: a, status: "completed", metadata: { trigger: "sibling" } }]);
    expect(await other.episodes()).toEqual([]);
    expect((await t.jobs()).map((j) => j.key)).toEqual([`idle:${elsewhere}`]);
  });

  it("takes over a sibling's timer that a worker is running: its reschedule does not put the idle time back", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    await t.say(a, "busy alpha");
    h.clock.advance(20 * MINUTE);
    const m2 = await t.say(a, "busy beta");
    await runMessageEmbedJob(h.svc.deps, a);
    // The timer fires at m1 + interval and a worker runs it: not idle yet (m2 came 10 minutes ago).
    h.clock.advance(10 * MINUTE);
    const [job] = await claimJobs(h.svc.deps.db, { now: h.clock.now(), leaseMs: LEASE_MS, limit: 1, key: `idle:${a}` });
    const result = await idleTimerJob(h.svc.deps, job);
    expect(result).toMatchObject({ next: "later", runAt: new Date(plus(m2.createdAt, DEFAULT_INTERVAL)) });
    // Meanwhile a new thread pulls the sibling forward; then the worker reschedules.
    await t.thread("ds");
    const due = iso(PULL_FORWARD_MS);
    if (result.next === "later") await rescheduleJob(h.svc.deps.db, job, result.runAt);
    // Before: the reschedule (the worker still held the row) put back m2 + interval, 20 minutes on.
    expect(await episodicJobs(t)).toMatchObject([
      { key: `idle:${a}`, runAt: due, lockedUntil: null, payload: { threadId: a, pulled: true } },
    ]);
    h.clock.set(new Date(due));
    await runDueJobs(h.svc.deps);
    expect(await t.episodes()).toMatchObject([{ thread_id: a, message_count: 2, metadata: { trigger: "sibling" } }]);
  });

  it("keeps a sibling's timer that is already due sooner", async () => {
    const t = await tenant();
    const a = await t.thread("ds", { autoEpisodeIntervalMs: 2 * MINUTE });
    const ma = await t.say(a, "short interval");
    h.clock.advance(30_000);
    await t.thread("ds");
    expect(await episodicJobs(t)).toMatchObject([{ key: `idle:${a}`, runAt: plus(ma.createdAt, 2 * MINUTE) }]);
    h.clock.advance(90_000);
    await runDueJobs(h.svc.deps);
    expect(await t.episodes()).toMatchObject([{ thread_id: a, status: "completed" }]);
  });

  it("works when the sibling's interval is null", async () => {
    const t = await tenant();
    await patchProjectSettings(
      { deps: h.svc.deps, projectId: t.projectId },
      { episodic: { autoEpisodeIntervalMs: null } },
    );
    const a = await t.thread("ds");
    await t.conversation(a, ["null sibling one", "null sibling two"]);
    expect(await episodicJobs(t)).toEqual([]);
    await t.thread("ds");
    expect(await episodicJobs(t)).toMatchObject([
      { key: `idle:${a}`, runAt: iso(PULL_FORWARD_MS), payload: { pulled: true } },
    ]);
    h.clock.advance(PULL_FORWARD_MS);
    await runDueJobs(h.svc.deps);
    expect(await t.episodes()).toMatchObject([
      { thread_id: a, status: "completed", message_count: 2, metadata: { trigger: "sibling" } },
    ]);
    expect(summaryCalls("null sibling").map(transcriptTexts)).toEqual([["null sibling one", "null sibling two"]]);
  });

  it("leaves siblings whose messages are already in an episode alone", async () => {
    const t = await tenant();
    const a = await t.thread("ds");
    const ma = await t.say(a, "already ended");
    await t.end(a);
    await runDueJobs(h.svc.deps);
    h.clock.advance(MINUTE);
    await t.thread("ds");
    expect(await episodicJobs(t)).toMatchObject([
      { key: `idle:${a}`, runAt: plus(ma.createdAt, DEFAULT_INTERVAL), payload: { threadId: a } },
    ]);
    expect((await episodicJobs(t))[0].payload.pulled).toBeUndefined();
    h.clock.advance(PULL_FORWARD_MS);
    await runDueJobs(h.svc.deps);
    expect(await t.episodes()).toHaveLength(1);
  });
});

import { type SQL, sql } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import type { Deps } from "../../lib/deps";
import { LEASE_MS, runDueJobs, runJobByKey, sweep } from "../../lib/jobs/runner";
import { createLlm } from "../../lib/llm/client";
import { patchProjectSettings } from "../../lib/settings/store";
import { gate, type Tenant, transcriptLines } from "../helpers/episodic-fixtures";
import type { ChatRequest } from "../helpers/fake-openai";
import { embedWaitingMessages } from "../helpers/jobs-of-kind";
import { fact, judge, useSemanticService } from "../helpers/semantic-fixtures";

/**
 * Proof under pressure, the faults: a provider that fails (500, 429, timeouts) for a window of
 * time and then recovers, a worker killed in the middle of an episode, the database failing a
 * statement in the middle of a request or of a background write, and /health while the database
 * is down. Everything runs on the real embedded database through the real job path (manual clock,
 * sweeps by hand), with the provider faked at its HTTP boundary.
 */

/** Statements matching `pattern` throw at the driver boundary (before they are sent), `times` of them. */
let failing: { pattern: RegExp; times: number } | undefined;
const S = useSemanticService({
  onQuery: (statement) => {
    if (failing && failing.times > 0 && failing.pattern.test(statement)) {
      failing.times--;
      throw new Error("injected database failure");
    }
  },
});
const { h, tenant, facts, entities, semanticState } = S;

const RETRY_INTERVAL_MS = 120_000;
const db = () => h.svc.deps.db;
/**
 * The conversations' `message-embed` jobs, run before the part of a test that counts jobs or arms
 * a fault, so sweeps and faults meet only the episode and extraction work (see helpers/jobs-of-kind.ts).
 */
const embedMessages = () => embedWaitingMessages(h.svc.deps, h.clock);
const failStatements = (pattern: RegExp, times = Number.POSITIVE_INFINITY) => {
  failing = { pattern, times };
};

beforeEach(() => {
  failing = undefined;
  h.fake.onStructured("fact_extraction", factsFromUserLines);
  h.fake.onStructured(
    "contradiction_judgement",
    judge(() => false),
  );
});
afterEach(() => {
  failing = undefined;
});

/** Every user line `I like <thing>` becomes the fact `user likes <thing>`, quoting the line. */
function factsFromUserLines(request: ChatRequest) {
  const things = transcriptLines(request)
    .map((line) => /^\[\d+\] user: I like (.+)$/.exec(line)?.[1])
    .filter((thing): thing is string => thing !== undefined);
  return {
    facts: things.map((thing) => fact("likes", thing, `I like ${thing}`)),
    entities: things.map((thing) => ({ name: thing, type: "CONCEPT" })),
  };
}

/** The service's deps with a provider client that gives up after `timeoutMs` (no SDK retries unless asked). */
function depsWithLlm(options: { timeoutMs: number; maxRetries?: number }): Deps {
  const deps = h.svc.deps;
  return { ...deps, llm: createLlm(deps.config, { maxRetries: options.maxRetries ?? 0, ...options }) };
}

interface EpisodeRow {
  id: string;
  thread_id: string;
  dataset: string;
  status: string;
  semantic_status: string;
  summary: string;
  error: string | null;
  retry_count: number;
  from_seq: number;
  to_seq: number;
  has_embedding: boolean;
}

async function episodeRows(t: Tenant): Promise<EpisodeRow[]> {
  return rowsOf<EpisodeRow>(
    await db().execute(sql`
      SELECT id, thread_id, dataset, status, semantic_status, summary, error, retry_count, from_seq, to_seq,
        embedding IS NOT NULL AS has_embedding
      FROM episodes WHERE project_id = ${t.projectId} ORDER BY dataset, from_seq`),
  ).map((r) => ({ ...r, retry_count: Number(r.retry_count), from_seq: Number(r.from_seq), to_seq: Number(r.to_seq) }));
}

async function count(query: SQL): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(await db().execute(query));
  return Number(row.n);
}

/** A thread in its own dataset whose user likes `things` (user and assistant turns alternate). */
async function conversationAbout(t: Tenant, dataset: string, things: string[]) {
  const threadId = await t.thread(dataset);
  await t.conversation(
    threadId,
    things.flatMap((thing) => [`I like ${thing}`, `Noted: ${thing}.`]),
  );
  return threadId;
}

/** No episode anywhere in the tenant is left pending or in processing, and one episode per cut range. */
async function expectSettled(t: Tenant) {
  const rows = await episodeRows(t);
  expect(rows.filter((r) => r.status === "pending" || r.status === "processing")).toEqual([]);
  expect(rows.filter((r) => r.status === "completed" && ["pending", "processing"].includes(r.semantic_status))).toEqual(
    [],
  );
  const ranges = rows.map((r) => `${r.thread_id}:${r.from_seq}-${r.to_seq}`);
  expect(new Set(ranges).size).toBe(ranges.length);
  return rows;
}

/** Facts of the tenant grouped by episode, predicate and object: each must be there once. */
async function expectFactsOnce(t: Tenant) {
  const all = await facts(t);
  const keys = all.map((f) => `${f.episodeId}|${f.dataset}|${f.predicate}|${f.object}`);
  expect(new Set(keys).size).toBe(keys.length);
  return all;
}

describe("provider outage, then recovery", () => {
  it("episodes ended during 500s, 429s, timeouts and failed embeddings fail with an error, are retried every interval, complete after recovery or stay failed past maxRetries; facts land once", async () => {
    const t = await tenant();
    // A client that gives up sooner on a hung provider (the test service's waits 5 s).
    const deps = depsWithLlm({ timeoutMs: 1000 });
    const things = (i: number) => [`jazz${i}`, `chess${i}`];

    // Round 0: the provider answers 500 to every model call. Three threads end during it.
    h.fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    const early: string[] = [];
    for (let i = 0; i < 3; i++) {
      const threadId = await conversationAbout(t, `early${i}`, things(i));
      early.push((await t.end(threadId)).episodeId as string);
    }
    expect(await embedMessages()).toBe(3);
    expect((await sweep(deps)).ran).toBe(3);
    for (const row of await episodeRows(t)) {
      expect(row).toMatchObject({ status: "failed", retry_count: 0, summary: "", has_embedding: false });
      expect(row.error).toMatch(/episode_summary.*500/);
    }

    // Round 1, a retry interval later: now 429 with retry-after (the client does not retry by
    // itself here). The early episodes are retried and fail again; two more threads end.
    h.clock.advance(RETRY_INTERVAL_MS);
    h.fake.clearFailures();
    h.fake.fail({ status: 429, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    const late: string[] = [];
    for (let i = 0; i < 2; i++) {
      const threadId = await conversationAbout(t, `late${i}`, things(10 + i));
      late.push((await t.end(threadId)).episodeId as string);
    }
    expect(await embedMessages()).toBe(2);
    expect(await sweep(deps)).toMatchObject({ retried: 3, ran: 5 });
    for (const row of await episodeRows(t)) {
      expect(row.status).toBe("failed");
      expect(row.error).toMatch(/429/);
    }

    // Round 2: the provider hangs; the client times out.
    h.clock.advance(RETRY_INTERVAL_MS);
    h.fake.clearFailures();
    h.fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat", hang: true });
    expect(await sweep(deps)).toMatchObject({ retried: 5, ran: 5 });
    for (const row of await episodeRows(t)) {
      expect(row.status).toBe("failed");
      expect(row.error).toMatch(/timed out/i);
    }

    // Round 3: chat is back but embeddings fail: the summary is made and thrown away.
    h.clock.advance(RETRY_INTERVAL_MS);
    h.fake.clearFailures();
    h.fake.fail({ status: 503, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    expect(await sweep(deps)).toMatchObject({ retried: 5, ran: 5 });
    for (const row of await episodeRows(t)) {
      expect(row).toMatchObject({ status: "failed", summary: "", has_embedding: false });
      expect(row.error).toMatch(/Embedding call failed.*503/);
    }
    // Between intervals nothing is retried (the 120 s cadence), however often the sweep runs.
    h.clock.advance(RETRY_INTERVAL_MS - 1);
    expect(await sweep(deps)).toMatchObject({ retried: 0, ran: 0 });
    h.clock.advance(1);

    // Round 4: the provider recovers, except that fact extraction answers 500 (its handler
    // throws). The early episodes have used their 3 retries (maxRetries, default 3): they stay
    // failed with their error. The late ones (2 retries so far) get their third and complete; their extraction fails.
    h.fake.clearFailures();
    h.fake.onStructured("fact_extraction", () => {
      throw new Error("extraction outage");
    });
    expect(await sweep(deps)).toMatchObject({ retried: 2, ran: 2 });
    const afterRecovery = await episodeRows(t);
    for (const id of early) {
      const row = afterRecovery.find((r) => r.id === id);
      expect(row).toMatchObject({ status: "failed", retry_count: 3, summary: "" });
      expect(row?.error).toMatch(/Embedding call failed.*503/);
    }
    for (const id of late) {
      expect(afterRecovery.find((r) => r.id === id)).toMatchObject({
        status: "completed",
        retry_count: 3,
        error: null,
        has_embedding: true,
      });
      expect(await semanticState(id)).toMatchObject({ semanticStatus: "failed", semanticRetryCount: 0 });
    }
    expect(await facts(t)).toEqual([]);

    // Round 5: extraction recovers; the failed extractions are retried a retry interval later.
    h.fake.onStructured("fact_extraction", factsFromUserLines);
    h.clock.advance(RETRY_INTERVAL_MS);
    expect(await sweep(deps)).toMatchObject({ retried: 0, retriedExtractions: 2, ran: 2 });
    // The exhausted episodes never come back by themselves, however long we wait...
    for (let i = 0; i < 3; i++) {
      h.clock.advance(RETRY_INTERVAL_MS);
      expect(await sweep(deps)).toMatchObject({ retried: 0, retriedExtractions: 0, ran: 0 });
    }
    // ...but the retry call bypasses the cap.
    for (const id of early) {
      const res = await t.get(`/v1/memory/episodic/episodes/${id}/retry`, { method: "POST" });
      expect(res.status).toBe(200);
    }
    expect(await runDueJobs(deps)).toBe(3);

    const rows = await expectSettled(t);
    expect(rows).toHaveLength(5);
    expect(rows.map((r) => [r.status, r.semantic_status])).toEqual(rows.map(() => ["completed", "completed"]));
    expect(rows.filter((r) => early.includes(r.id)).map((r) => r.retry_count)).toEqual([4, 4, 4]);
    const written = await expectFactsOnce(t);
    expect(written.map((f) => f.object).sort()).toEqual(
      [0, 1, 2, 10, 11].flatMap((i) => things(i)).sort((a, b) => a.localeCompare(b)),
    );
    // More sweeps change nothing: no second episode, no second fact.
    h.clock.advance(RETRY_INTERVAL_MS);
    expect(await sweep(deps)).toMatchObject({ retried: 0, retriedExtractions: 0, ran: 0 });
    expect(await facts(t)).toHaveLength(written.length);
  });

  it("maxRetries 0: a failed episode is never retried in the background and keeps its error", async () => {
    const t = await tenant();
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { episodic: { maxRetries: 0 } });
    const deps = depsWithLlm({ timeoutMs: 5000 });
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const { episodeId } = await t.end(await conversationAbout(t, "ds", ["tea"]));
    await sweep(deps);
    for (let i = 0; i < 3; i++) {
      h.clock.advance(RETRY_INTERVAL_MS);
      expect((await sweep(deps)).retried).toBe(0);
    }
    const [row] = await expectSettled(t);
    expect(row).toMatchObject({ id: episodeId, status: "failed", retry_count: 0 });
    expect(row.error).toMatch(/500/);
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
  });

  it("short bursts of 429 and timeouts inside the client's own retries never fail an episode", async () => {
    const t = await tenant();
    const deps = depsWithLlm({ timeoutMs: 1000, maxRetries: 2 });
    const { episodeId } = await t.end(await conversationAbout(t, "ds", ["tea", "cake"]));
    // The messages' own embedding first, so the hung embedding below is the episode's.
    expect(await embedMessages()).toBe(1);
    const embeddedBefore = h.fake.embeddingCalls().length;
    h.fake.fail({ status: 429, times: 2, endpoint: "chat" });
    h.fake.fail({ status: 500, times: 1, endpoint: "embeddings", hang: true });
    expect((await sweep(deps)).ran).toBe(1);
    const [row] = await expectSettled(t);
    expect(row).toMatchObject({ id: episodeId, status: "completed", retry_count: 0, error: null });
    // Two refused summary calls, then one answered; one hung embedding, then one answered.
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(3);
    const [hung, answered] = h.fake.embeddingCalls().slice(embeddedBefore);
    expect(answered).toEqual(hung);
    expect(hung.input).toEqual([row.summary]);
    expect((await expectFactsOnce(t)).map((f) => f.object).sort()).toEqual(["cake", "tea"]);
  });
});

describe("a worker killed mid-episode", () => {
  /**
   * The first summary call never returns until the test says so (the worker is dead as far as
   * anyone can tell); later calls answer at once, or wait on `second` when given.
   */
  function holdFirstSummary(late: () => unknown, second?: ReturnType<typeof gate>) {
    const first = { reached: gate(), release: gate() };
    const secondReached = gate();
    let calls = 0;
    h.fake.onStructured("episode_summary", async () => {
      calls++;
      if (calls === 1) {
        first.reached.open();
        await first.release.opened;
        return late();
      }
      if (second) {
        secondReached.open();
        await second.opened;
      }
      return { summary: "recovered summary", keyLearnings: ["recovered"] };
    });
    return { ...first, secondReached };
  }

  async function endedThread(t: Tenant) {
    const threadId = await conversationAbout(t, "ds", ["rowing", "sailing"]);
    const { episodeId } = await t.end(threadId);
    // The messages' embedding job is not part of what the lease tests count.
    expect(await embedMessages()).toBe(1);
    return episodeId as string;
  }

  it("past the lease the sweep recovers the episode and completes it once; the stale worker's late answer writes nothing", async () => {
    const t = await tenant();
    const episodeId = await endedThread(t);
    const held = holdFirstSummary(() => ({ summary: "stale summary", keyLearnings: ["stale"] }));
    const stale = runDueJobs(h.svc.deps);
    await held.reached.opened;
    expect((await t.episode(episodeId)).status).toBe("processing");

    // Inside the lease nobody touches it.
    h.clock.advance(LEASE_MS - 1);
    expect((await sweep(h.svc.deps)).ran).toBe(0);
    h.clock.advance(2);
    expect((await sweep(h.svc.deps)).ran).toBe(1);
    expect(await t.episode(episodeId)).toMatchObject({ status: "completed", summary: "recovered summary" });

    held.release.open();
    await stale;
    expect(await t.episode(episodeId)).toMatchObject({
      status: "completed",
      summary: "recovered summary",
      keyLearnings: ["recovered"],
      retryCount: 0,
      error: null,
    });
    const rows = await expectSettled(t);
    expect(rows).toHaveLength(1);
    expect((await expectFactsOnce(t)).map((f) => f.object).sort()).toEqual(["rowing", "sailing"]);
    expect(
      await count(sql`SELECT count(*) AS n FROM jobs WHERE project_id = ${t.projectId} AND kind <> 'thread-idle'`),
    ).toBe(0);
  });

  it("a stale answer arriving while the new owner is still working writes nothing; the owner's result lands", async () => {
    const t = await tenant();
    const episodeId = await endedThread(t);
    const second = gate();
    const held = holdFirstSummary(() => ({ summary: "stale summary", keyLearnings: ["stale"] }), second);
    const stale = runDueJobs(h.svc.deps);
    await held.reached.opened;
    h.clock.advance(LEASE_MS + 1);
    const owner = sweep(h.svc.deps);
    await held.secondReached.opened;

    held.release.open();
    await stale;
    // The stale answer came back first, but the episode belongs to the new claim.
    expect(await t.episode(episodeId)).toMatchObject({ status: "processing", summary: "" });

    second.open();
    expect((await owner).ran).toBe(1);
    expect(await t.episode(episodeId)).toMatchObject({
      status: "completed",
      summary: "recovered summary",
      retryCount: 0,
      error: null,
    });
    expect(await expectSettled(t)).toHaveLength(1);
    expect((await expectFactsOnce(t)).map((f) => f.object).sort()).toEqual(["rowing", "sailing"]);
  });

  it("a stale failure arriving while the new owner is still working does not mark the episode failed", async () => {
    const t = await tenant();
    const episodeId = await endedThread(t);
    const second = gate();
    // The stale worker's call ends in a provider error (its handler throws: a 500).
    const held = holdFirstSummary(() => {
      throw new Error("stale worker's provider error");
    }, second);
    const stale = runDueJobs(h.svc.deps);
    await held.reached.opened;
    h.clock.advance(LEASE_MS + 1);
    const owner = sweep(h.svc.deps);
    await held.secondReached.opened;

    held.release.open();
    await stale;
    expect(await t.episode(episodeId)).toMatchObject({ status: "processing", error: null });

    second.open();
    await owner;
    expect(await t.episode(episodeId)).toMatchObject({
      status: "completed",
      summary: "recovered summary",
      retryCount: 0,
      error: null,
    });
    expect(await expectSettled(t)).toHaveLength(1);
    // Nothing was left for the background retry to pick up.
    h.clock.advance(RETRY_INTERVAL_MS);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, ran: 0 });
  });

  it("killed mid fact extraction: the extraction is taken over after the lease; the stale extraction writes no fact", async () => {
    const t = await tenant();
    const episodeId = await endedThread(t);
    const first = { reached: gate(), release: gate() };
    const second = { reached: gate(), release: gate() };
    let calls = 0;
    h.fake.onStructured("fact_extraction", async (request) => {
      calls++;
      const turn = calls === 1 ? first : second;
      turn.reached.open();
      await turn.release.opened;
      if (calls === 1) {
        // The stale worker's answer is different (and would be a visible extra fact).
        return {
          facts: [fact("likes", "rowing", "I like rowing"), fact("likes", "stale", "I like rowing")],
          entities: [],
        };
      }
      return factsFromUserLines(request);
    });
    const stale = runDueJobs(h.svc.deps);
    await first.reached.opened;
    expect(await semanticState(episodeId)).toMatchObject({ status: "completed", semanticStatus: "processing" });

    h.clock.advance(LEASE_MS + 1);
    const owner = sweep(h.svc.deps);
    await second.reached.opened;
    first.release.open();
    await stale;
    expect(await facts(t)).toEqual([]);
    expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "processing", semanticError: null });

    second.release.open();
    await owner;
    expect(await semanticState(episodeId)).toMatchObject({ status: "completed", semanticStatus: "completed" });
    expect((await expectFactsOnce(t)).map((f) => f.object).sort()).toEqual(["rowing", "sailing"]);
    expect(await expectSettled(t)).toHaveLength(1);
  });
});

describe("concurrent extractions", () => {
  it("two extractions of one dataset racing between their duplicate check and their write store the fact once", async () => {
    const t = await tenant();
    // Every new fact is judged against "likes coffee", which holds the first extraction between
    // its duplicate check and its write while the second one runs to the end.
    await S.setSemantic(t, { contradictionBandMin: 0.3 });
    await t.end(await conversationAbout(t, "ds", ["coffee"]));
    await runDueJobs(h.svc.deps);
    const first = (await t.end(await conversationAbout(t, "ds", ["tea"]))).episodeId as string;
    const second = (await t.end(await conversationAbout(t, "ds", ["tea"]))).episodeId as string;
    const reached = gate();
    const release = gate();
    let judged = 0;
    h.fake.onStructured("contradiction_judgement", async (request) => {
      if (++judged === 1) {
        reached.open();
        await release.opened;
      }
      return judge(() => false)(request);
    });
    const slow = runJobByKey(h.svc.deps, `episode:${first}`);
    await reached.opened;
    expect(await runJobByKey(h.svc.deps, `episode:${second}`)).toBe(true);
    release.open();
    await slow;

    expect(judged).toBe(2);
    const live = (await expectFactsOnce(t)).filter((f) => f.invalidAt === null);
    expect(live.map((f) => f.object).sort()).toEqual(["coffee", "tea"]);
    expect(await semanticState(first)).toMatchObject({ semanticStatus: "completed", semanticError: null });
    expect(await semanticState(second)).toMatchObject({ semanticStatus: "completed", semanticError: null });
    expect((await entities(t)).map((e) => e.name).sort()).toEqual(["coffee", "tea"]);
  });
});

describe("the database failing a statement leaves no partial write", () => {
  /** A trigger that raises inside the database (after the statement's earlier parts ran) when `when` holds. */
  async function refuse(name: string, table: string, event: "INSERT" | "UPDATE" | "DELETE", when: string) {
    await db().execute(
      sql.raw(`CREATE OR REPLACE FUNCTION fault_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected failure in %', TG_TABLE_NAME; END $$`),
    );
    await db().execute(
      sql.raw(
        `CREATE TRIGGER ${name} BEFORE ${event} ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION fault_refuse()`,
      ),
    );
    return () => db().execute(sql.raw(`DROP TRIGGER ${name} ON ${table}`));
  }

  /** Rows of a dataset, table by table. */
  async function datasetRows(t: Tenant, dataset: string) {
    const scope = sql`project_id = ${t.projectId} AND dataset = ${dataset}`;
    return {
      threads: await count(sql`SELECT count(*) AS n FROM threads WHERE ${scope}`),
      messages: await count(
        sql`SELECT count(*) AS n FROM messages m JOIN threads th ON th.id = m.thread_id WHERE th.project_id = ${t.projectId} AND th.dataset = ${dataset}`,
      ),
      episodes: await count(sql`SELECT count(*) AS n FROM episodes WHERE ${scope}`),
      facts: await count(sql`SELECT count(*) AS n FROM facts WHERE ${scope}`),
      entities: await count(sql`SELECT count(*) AS n FROM entities WHERE ${scope}`),
      links: await count(
        sql`SELECT count(*) AS n FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id WHERE f.project_id = ${t.projectId} AND f.dataset = ${dataset}`,
      ),
      jobs: await count(sql`SELECT count(*) AS n FROM jobs WHERE ${scope}`),
      // The conversation index: keyword rows and vectors of the dataset's messages, and the
      // threads' waiting embedding jobs (counted in `jobs` too).
      indexed: await count(sql`SELECT count(*) AS n FROM message_search WHERE ${scope}`),
      vectors: await count(sql`SELECT count(*) AS n FROM message_vectors WHERE ${scope}`),
      embedJobs: await count(sql`SELECT count(*) AS n FROM jobs WHERE ${scope} AND kind = 'message-embed'`),
    };
  }

  it("dataset erase: a failed erase (refused by the driver, or by the database midway) removes nothing; then it removes everything", async () => {
    const t = await tenant();
    for (const dataset of ["doomed", "kept"]) {
      const threadId = await conversationAbout(t, dataset, [`${dataset}jazz`, `${dataset}chess`]);
      await t.end(threadId);
    }
    // The ended threads' messages get their vectors.
    expect(await embedMessages()).toBe(2);
    for (const dataset of ["doomed", "kept"]) {
      // A second, open thread with messages not yet in an episode (and its idle timer), nor
      // embedded (its embedding job waits for the thread to be quiet).
      const open = await t.thread(dataset);
      await t.say(open, "I like waiting");
    }
    expect(await runDueJobs(h.svc.deps)).toBe(2);
    const before = await datasetRows(t, "doomed");
    // Both threads' idle timers are still waiting, and the open thread's embedding job.
    expect(before).toEqual({
      threads: 2,
      messages: 5,
      episodes: 1,
      facts: 2,
      entities: 2,
      links: 2,
      jobs: 3,
      indexed: 3,
      vectors: 2,
      embedJobs: 1,
    });
    const kept = await datasetRows(t, "kept");
    const erase = () => t.get("/v1/memory/recall/datasets/doomed", { method: "DELETE" });

    // The erase statement fails at the driver.
    failStatements(/DELETE FROM "threads"/, 1);
    expect((await erase()).status).toBe(500);
    expect(await datasetRows(t, "doomed")).toEqual(before);

    // The database raises while deleting entities, after threads, episodes and facts were deleted
    // by the same statement: all of it is rolled back.
    const drop = await refuse("fault_entities", "entities", "DELETE", "OLD.dataset = 'doomed'");
    try {
      expect((await erase()).status).toBe(500);
    } finally {
      await drop();
    }
    expect(await datasetRows(t, "doomed")).toEqual(before);

    const res = await erase();
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      dataset: "doomed",
      deleted: { threads: 2, episodes: 1, facts: 2, entities: 2 },
    });
    expect(await datasetRows(t, "doomed")).toEqual({
      threads: 0,
      messages: 0,
      episodes: 0,
      facts: 0,
      entities: 0,
      links: 0,
      jobs: 0,
      indexed: 0,
      vectors: 0,
      embedJobs: 0,
    });
    expect(await datasetRows(t, "kept")).toEqual(kept);
  });

  it("episode summary write fails: nothing of it lands, the episode is failed with a readable error and completes on a retry", async () => {
    const t = await tenant();
    const episodeId = (await t.end(await conversationAbout(t, "ds", ["tea"]))).episodeId as string;
    expect(await embedMessages()).toBe(1);
    const nothingLanded = async (retryCount: number, error: RegExp) => {
      const [row] = await episodeRows(t);
      expect(row).toMatchObject({ id: episodeId, status: "failed", retry_count: retryCount, summary: "" });
      expect(row.has_embedding).toBe(false);
      expect(row.error).toMatch(error);
      // One readable line: not the statement with its parameters (the summary, a vector).
      expect(row.error?.length).toBeLessThan(200);
      expect(await facts(t)).toEqual([]);
    };

    // At the driver.
    failStatements(/SET status = 'completed', summary =/, 1);
    await runDueJobs(h.svc.deps);
    await nothingLanded(0, /^injected database failure$/);

    // Raised by the database while writing the summary.
    const drop = await refuse("fault_episodes", "episodes", "UPDATE", "NEW.status = 'completed'");
    h.clock.advance(RETRY_INTERVAL_MS);
    try {
      expect(await sweep(h.svc.deps)).toMatchObject({ retried: 1, ran: 1 });
    } finally {
      await drop();
    }
    await nothingLanded(1, /^Database error: injected failure in episodes$/);
    expect((await t.episode(episodeId)).error).toBe("Database error: injected failure in episodes");

    h.clock.advance(RETRY_INTERVAL_MS);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 1, ran: 1 });
    const [row] = await expectSettled(t);
    expect(row).toMatchObject({
      status: "completed",
      retry_count: 2,
      error: null,
      summary: expect.stringContaining("tea"),
    });
    expect((await expectFactsOnce(t)).map((f) => f.object)).toEqual(["tea"]);
  });

  it("fact batch: a statement failing inside it (at the driver, or raised by the database) rolls back the whole batch; the retry writes it once", async () => {
    const t = await tenant();
    const episodeId = (await t.end(await conversationAbout(t, "ds", ["tea", "cake"]))).episodeId as string;
    expect(await embedMessages()).toBe(1);

    // The facts insert fails at the driver, after the batch's status update and entity insert ran.
    failStatements(/^\s*WITH written AS \(\s*insert into "facts"/, 1);
    await runDueJobs(h.svc.deps);
    expect(await semanticState(episodeId)).toMatchObject({
      status: "completed",
      semanticStatus: "failed",
      semanticError: "injected database failure",
    });
    expect(await datasetRows(t, "ds")).toMatchObject({ episodes: 1, facts: 0, entities: 0, links: 0 });

    // The retry: the database itself refuses the last statement of the batch (the links).
    const drop = await refuse("fault_links", "fact_entities", "INSERT", "true");
    h.clock.advance(RETRY_INTERVAL_MS);
    try {
      expect(await sweep(h.svc.deps)).toMatchObject({ retriedExtractions: 1, ran: 1 });
    } finally {
      await drop();
    }
    expect(await semanticState(episodeId)).toMatchObject({
      semanticStatus: "failed",
      semanticRetryCount: 1,
      semanticError: "Database error: injected failure in fact_entities",
    });
    expect(await datasetRows(t, "ds")).toMatchObject({ facts: 0, entities: 0, links: 0 });

    h.clock.advance(RETRY_INTERVAL_MS);
    expect(await sweep(h.svc.deps)).toMatchObject({ retriedExtractions: 1, ran: 1 });
    expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "completed", semanticRetryCount: 2 });
    expect(await datasetRows(t, "ds")).toMatchObject({ facts: 2, entities: 2, links: 2 });
    expect((await expectFactsOnce(t)).map((f) => f.object).sort()).toEqual(["cake", "tea"]);
    expect((await entities(t)).map((e) => e.name).sort()).toEqual(["cake", "tea"]);
    expect(await expectSettled(t)).toHaveLength(1);
  });

  it("message insert: a failed insert answers 500, stores nothing and consumes no sequence number", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    expect((await t.say(threadId, "one")).sequenceNumber).toBe(1);
    const add = (content: string) =>
      t.get(`/v1/memory/working/threads/${threadId}/messages`, { method: "POST", json: { role: "user", content } });

    // At the driver: the statement is never sent.
    failStatements(/SET last_seq = last_seq \+ 1, live_count/, 1);
    const refused = await add("two (refused by the driver)");
    expect(refused.status).toBe(500);
    expect(await refused.json()).toEqual({ error: expect.any(String) });

    // In the database, after the same statement bumped the thread's counter: rolled back.
    const drop = await refuse("fault_messages", "messages", "INSERT", "NEW.content LIKE '%refused by the database%'");
    try {
      expect((await add("two (refused by the database)")).status).toBe(500);
    } finally {
      await drop();
    }

    expect((await t.say(threadId, "two")).sequenceNumber).toBe(2);
    const res = await t.get(`/v1/memory/working/threads/${threadId}/messages?order=asc`);
    const body = (await res.json()) as { messages: { content: string; sequenceNumber: number }[]; total: number };
    expect(body.messages.map((m) => [m.sequenceNumber, m.content])).toEqual([
      [1, "one"],
      [2, "two"],
    ]);
    expect(body.total).toBe(2);
    const [thread] = rowsOf<{ last_seq: number; live_count: number }>(
      await db().execute(sql`SELECT last_seq, live_count FROM threads WHERE id = ${threadId}`),
    );
    expect(thread).toEqual({ last_seq: 2, live_count: 2 });
  });
});

describe("/health", () => {
  it("answers 503 while the database is down and 200 once it is back", async () => {
    const health = async () => {
      const res = await h.svc.request("/health");
      return { status: res.status, body: await res.json() };
    };
    expect(await health()).toEqual({ status: 200, body: { status: "ok", services: { postgres: "ok" } } });
    failStatements(/.*/);
    expect(await health()).toEqual({ status: 503, body: { status: "degraded", services: { postgres: "error" } } });
    expect(await health()).toMatchObject({ status: 503 });
    failing = undefined;
    expect(await health()).toEqual({ status: 200, body: { status: "ok", services: { postgres: "ok" } } });
  });
});

import { randomUUID } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import type pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { manualClock } from "../../lib/clock";
import { rowsOf } from "../../lib/db/rows";
import { countAndReadBatchSql, EMBED_BATCH, embedNowJob } from "../../lib/evidence/embed";
import { countThreadTermsCtes } from "../../lib/evidence/terms";
import { EMBED_DEBOUNCE_MS, EMBED_MAX_WAIT_MS } from "../../lib/evidence/write";
import { runDueJobs, runJob } from "../../lib/jobs/runner";
import { claimJobs, LEASE_MS } from "../../lib/jobs/store";
import type { ApiSchema } from "../helpers/api-types";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { embedWaitingMessages, runMessageEmbedJob } from "../helpers/jobs-of-kind";
import { useServerConnections } from "../helpers/server-connections";
import { createTestService, newTenant, type TestService } from "../helpers/service";
import { testPgUrl } from "../helpers/test-database";

/**
 * Messages' keyword statistics (message_terms) are counted off the write path: an append writes
 * the index row only (`terms_counted` false), the thread's `message-embed` job counts it before it
 * calls the provider, and the delete trigger subtracts the rows it had counted. Whatever the order
 * of appends, jobs and deletions (a forgotten fact's messages, a thread, an erased dataset), the
 * statistics equal a recount of the counted rows; and recall finds a message by a word the
 * statistics do not hold yet. Against a PostgreSQL server (npm run test:pg), the same with a job
 * and a deletion of the same rows in two transactions at once.
 */

let svc: TestService;
let fake: FakeOpenAI;
let clock: ReturnType<typeof manualClock>;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake, manualTime: true });
  clock = svc.clock as ReturnType<typeof manualClock>;
  clock.set(new Date("2026-06-01T12:00:00.000Z"));
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.clearFailures();
});

type Recall = ApiSchema<"RecallResponse">;

async function tenant(service: TestService, dataset = `ds-${randomUUID().slice(0, 6)}`) {
  const t = await newTenant(service, `terms-${randomUUID().slice(0, 6)}`);
  const post = (path: string, json: unknown) => service.request(path, { method: "POST", token: t.key, json });
  return {
    ...t,
    dataset,
    async thread(inDataset = dataset) {
      const res = await post("/v1/threads", { dataset: inDataset });
      expect(res.status).toBe(201);
      return ((await res.json()) as { threadId: string }).threadId;
    },
    async say(threadId: string, content: string, role = "user") {
      const res = await post(`/v1/memory/working/threads/${threadId}/messages`, { role, content });
      expect(res.status, await res.clone().text()).toBe(201);
      return ((await res.json()) as { messageId: string }).messageId;
    },
    /** Many user messages in one request (messages:batch). */
    async sayMany(threadId: string, contents: string[]) {
      const messages = contents.map((content) => ({ role: "user", content }));
      const res = await post(`/v1/memory/working/threads/${threadId}/messages:batch`, { messages });
      expect(res.status, await res.clone().text()).toBe(201);
    },
    async recall(query: string) {
      const res = await post("/v1/memory/recall", { dataset, query, include: ["messages"] });
      expect(res.status).toBe(200);
      return ((await res.json()) as Recall).messages?.map((m) => m.messageId) ?? [];
    },
    /** Forgets a fact quoting `quote`: its messages leave the index (lib/evidence/write.ts). */
    async forget(quote: string) {
      const factId = `fct_${randomUUID().slice(0, 8)}`;
      await service.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
        VALUES (${factId}, ${t.projectId}, ${dataset}, 'user', 'said', 'something', 0.9, ${quote}, now())`);
      const res = await service.request(`/v1/memory/semantic/datasets/${dataset}/facts/${factId}`, {
        method: "DELETE",
        token: t.key,
      });
      expect(res.status).toBe(200);
    },
    async erase(which = dataset) {
      const res = await service.request(`/v1/memory/recall/datasets/${which}`, { method: "DELETE", token: t.key });
      expect(res.status).toBe(200);
    },
  };
}

interface TermRow {
  dataset: string;
  term: string;
  docs: number;
  lexemes: number;
}

/** The statistics of a project's messages (rows not all zero), and a recount of its counted index rows. */
const KEPT = (projectId: string) => sql`
  SELECT dataset, term, docs::int AS docs, lexemes::int AS lexemes FROM message_terms
  WHERE project_id = ${projectId} AND (docs <> 0 OR lexemes <> 0) ORDER BY dataset, term`;
const RECOUNT = (projectId: string) => sql`
  SELECT dataset, term, docs::int AS docs, lexemes::int AS lexemes FROM (
    SELECT s.dataset, u.lexeme AS term, count(*) AS docs, 0 AS lexemes
    FROM message_search s CROSS JOIN LATERAL unnest(s.search) u
    WHERE s.project_id = ${projectId} AND s.terms_counted GROUP BY s.dataset, u.lexeme
    UNION ALL
    SELECT dataset, '', count(*), sum(length(search)) FROM message_search
    WHERE project_id = ${projectId} AND terms_counted GROUP BY dataset) x
  ORDER BY dataset, term`;
const UNCOUNTED = (projectId: string) =>
  sql`SELECT count(*)::int AS n FROM message_search WHERE project_id = ${projectId} AND NOT terms_counted`;

async function statistics(service: TestService, projectId: string) {
  const read = async (q: SQL) => rowsOf<TermRow>(await service.deps.db.execute(q));
  const [uncounted] = rowsOf<{ n: number }>(await service.deps.db.execute(UNCOUNTED(projectId)));
  return { kept: await read(KEPT(projectId)), recount: await read(RECOUNT(projectId)), uncounted: uncounted.n };
}

/** The statistics are exactly the counted rows' (and, with `uncounted`, that many rows wait for their job). */
async function expectExact(service: TestService, projectId: string, uncounted: number) {
  const s = await statistics(service, projectId);
  expect(s.kept).toEqual(s.recount);
  expect(s.uncounted).toBe(uncounted);
  return s.kept;
}

const datasetsOf = (rows: TermRow[]) => [...new Set(rows.map((r) => r.dataset))];

describe("counted off the write path", () => {
  it("an append counts nothing; its thread's job counts it before calling the provider, once", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    const heron = await t.say(th, "The heron fishes at dawn by the old mill.");
    await t.say(th, "Herons and egrets share the marsh.");
    await t.say(th, "heron talk from the assistant", "assistant"); // not indexed
    expect(await expectExact(svc, t.projectId, 2)).toEqual([]);
    // Nothing counted in the dataset at all: found by keyword in the next statement all the same.
    expect(await t.recall("heron")).toContain(heron);

    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps); // the provider fails: the job is retried later
    expect(fake.embeddingCalls().length).toBeGreaterThan(0);
    const counted = await expectExact(svc, t.projectId, 0);
    expect(counted.find((r) => r.term === "")).toMatchObject({ dataset: t.dataset, docs: 2 });
    expect(counted.find((r) => r.term === "heron")).toMatchObject({ docs: 2 });

    fake.clearFailures();
    clock.advance(10 * 60_000); // past the job's backoff
    await runDueJobs(svc.deps);
    const [vectors] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM message_vectors WHERE thread_id = ${th}`),
    );
    expect(vectors.n).toBe(2);
    expect(await expectExact(svc, t.projectId, 0)).toEqual(counted); // not counted twice
  });

  it("stays exact through appends, jobs and deletions in any order: a forgotten fact, a thread, an erased dataset", async () => {
    const t = await tenant(svc);
    const [a, b] = [await t.thread(), await t.thread()];
    const other = await t.thread(`${t.dataset}-kept`);
    await t.say(a, "The heron fishes at dawn.");
    const forgottenCounted = await t.say(a, "I adopted a cat named Miso last week.");
    await t.say(other, "A dataset of its own, with a heron in it.");
    clock.advance(EMBED_MAX_WAIT_MS);
    await runMessageEmbedJob(svc.deps, a);
    await runMessageEmbedJob(svc.deps, other);
    await t.say(a, "Another heron, later.");
    const forgottenUncounted = await t.say(b, "Yes, I ADOPTED a cat named   Miso.");
    await t.say(b, "Otters hold hands while they sleep.");
    expect(datasetsOf(await expectExact(svc, t.projectId, 3))).toEqual([t.dataset, `${t.dataset}-kept`]);

    // A forgotten fact takes a counted and an uncounted message out of the index.
    await t.forget("adopted a cat named Miso");
    const [left] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM message_search
        WHERE message_id IN (${forgottenCounted}, ${forgottenUncounted})`),
    );
    expect(left.n).toBe(0);
    const afterForget = await expectExact(svc, t.projectId, 2);
    expect(afterForget.some((r) => r.term === "miso")).toBe(false);

    expect(await embedWaitingMessages(svc.deps, clock)).toBeGreaterThanOrEqual(2);
    await expectExact(svc, t.projectId, 0);

    // A thread deleted with counted and uncounted rows; its job, armed by the last, then ends.
    await t.say(a, "A kingfisher dives.");
    await svc.deps.db.execute(sql`DELETE FROM threads WHERE id = ${a}`);
    const afterThread = await expectExact(svc, t.projectId, 0);
    expect(afterThread.find((r) => r.dataset === t.dataset && r.term === "")).toMatchObject({ docs: 1 }); // the otters
    expect(afterThread.some((r) => r.dataset === t.dataset && r.term === "heron")).toBe(false);
    await embedWaitingMessages(svc.deps, clock);

    // An erased dataset with counted and uncounted rows: nothing of it is left; the other dataset keeps its own.
    await t.say(b, "One more about otters.");
    await t.erase();
    const afterErase = await expectExact(svc, t.projectId, 0);
    expect(datasetsOf(afterErase)).toEqual([`${t.dataset}-kept`]);
    expect(afterErase.find((r) => r.term === "heron")).toMatchObject({ docs: 1 });
    await embedWaitingMessages(svc.deps, clock);
    await expectExact(svc, t.projectId, 0);
  });

  it("a message written as its thread's job ends (after its last store, before it completes) is counted and embedded by the next run, a debounce later", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    await t.say(th, "Gannets dive for fish.");
    clock.advance(EMBED_MAX_WAIT_MS);
    const [job] = await claimJobs(svc.deps.db, { now: clock.now(), leaseMs: LEASE_MS, limit: 1, key: `embed:${th}` });
    let late = "";
    await runJob(svc.deps, job, async (deps, claimed) => {
      const result = await embedNowJob(deps, claimed);
      late = await t.say(th, "Puffins nest in burrows.");
      return result;
    });
    expect(fake.embeddingCalls().map((c) => c.input)).toEqual([["Gannets dive for fish."]]);
    await runDueJobs(svc.deps); // within the debounce: no second batch yet
    expect(fake.embeddingCalls()).toHaveLength(1);
    clock.advance(EMBED_DEBOUNCE_MS);
    await runDueJobs(svc.deps);
    expect(fake.embeddingCalls().map((c) => c.input)).toEqual([
      ["Gannets dive for fish."],
      ["Puffins nest in burrows."],
    ]);
    const [after] = rowsOf<{ jobs: number; vectors: number }>(
      await svc.deps.db.execute(sql`SELECT (SELECT count(*)::int FROM jobs WHERE key = ${`embed:${th}`}) AS jobs,
        (SELECT count(*)::int FROM message_vectors WHERE message_id = ${late}) AS vectors`),
    );
    expect(after).toEqual({ jobs: 0, vectors: 1 });
    expect((await expectExact(svc, t.projectId, 0)).find((r) => r.term === "puffin")).toMatchObject({ docs: 1 });
  });

  it("without an embedding endpoint, the job still counts, the whole thread past its first window (then fails for want of one)", async () => {
    const bare = await createTestService({ manualTime: true });
    try {
      const bareClock = bare.clock as ReturnType<typeof manualClock>;
      const t = await tenant(bare);
      const th = await t.thread();
      const n = EMBED_BATCH + 44;
      await t.sayMany(th, [
        "Puffins nest in burrows.",
        ...Array.from({ length: n - 1 }, (_, i) => `Otter ${i} swims.`),
      ]);
      expect(await expectExact(bare, t.projectId, n)).toEqual([]);
      bareClock.advance(EMBED_MAX_WAIT_MS);
      await runDueJobs(bare.deps);
      const counted = await expectExact(bare, t.projectId, 0);
      expect(counted.find((r) => r.term === "")).toMatchObject({ docs: n });
      expect(counted.find((r) => r.term === "puffin")).toMatchObject({ docs: 1 });
      expect(counted.find((r) => r.term === "otter")).toMatchObject({ docs: n - 1 });
    } finally {
      await bare.close();
    }
  });

  it("a failing provider: the run counts the whole thread; once it is back the thread is embedded, nothing counted twice", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    const n = 2 * EMBED_BATCH + 10;
    await t.sayMany(
      th,
      Array.from({ length: n }, (_, i) => `Heron ${i} waits.`),
    );
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    const counted = await expectExact(svc, t.projectId, 0);
    expect(counted.find((r) => r.term === "")).toMatchObject({ docs: n });
    fake.clearFailures();
    for (let i = 0; i < 6; i++) {
      clock.advance(10 * 60_000); // past the job's backoff, then each batch's debounce
      await runDueJobs(svc.deps);
    }
    const [embedded] = rowsOf<{ vectors: number; jobs: number }>(
      await svc.deps.db.execute(sql`SELECT (SELECT count(*)::int FROM message_vectors WHERE thread_id = ${th}) AS vectors,
        (SELECT count(*)::int FROM jobs WHERE key = ${`embed:${th}`}) AS jobs`),
    );
    expect(embedded).toEqual({ vectors: n, jobs: 0 });
    expect(await expectExact(svc, t.projectId, 0)).toEqual(counted);
  });
});

describe("a message the embedding provider refuses", () => {
  /** Each of the thread's messages by its first word, with whether it has a vector and what it was embedded from. */
  async function vectorsOf(threadId: string) {
    const rows = rowsOf<{ content: string; vector: boolean }>(
      await svc.deps.db.execute(sql`SELECT m.content, v.message_id IS NOT NULL AS vector
        FROM messages m LEFT JOIN message_vectors v ON v.message_id = m.id
        WHERE m.thread_id = ${threadId} ORDER BY m.seq`),
    );
    return rows.map((r) => [r.content.split(" ")[0], r.vector]);
  }
  const jobsOf = async (threadId: string) =>
    rowsOf<{ attempts: number }>(
      await svc.deps.db.execute(sql`SELECT attempts FROM jobs WHERE key = ${`embed:${threadId}`}`),
    );
  // 1,600 characters: 400 tokens whole, 125 by its first 500 characters (fakeTokens).
  const LONG = `Kestrels hover ${"over the meadow at dawn ".repeat(66)}`.slice(0, 1_600);

  it("is left without a vector and found by keyword; the thread's other messages are embedded and its job ends", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    fake.maxInputTokens = 64; // refuses LONG whole and by its head
    await t.sayMany(th, ["Puffins nest in burrows.", LONG, "Otters float on their backs."]);
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    expect(await vectorsOf(th)).toEqual([
      ["Puffins", true],
      ["Kestrels", false],
      ["Otters", true],
    ]);
    expect(await jobsOf(th)).toEqual([]);
    const [kestrels] = rowsOf<{ id: string }>(
      await svc.deps.db.execute(sql`SELECT id FROM messages WHERE thread_id = ${th} AND content LIKE 'Kestrels%'`),
    );
    expect((await t.recall("kestrels"))[0]).toBe(kestrels.id);
    // Later messages are embedded as usual: the mark passed the refused one.
    await t.say(th, "Herons wait in the shallows.");
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    expect((await vectorsOf(th)).at(-1)).toEqual(["Herons", true]);
    expect(fake.embeddingCalls().filter((c) => c.input.includes(LONG))).not.toHaveLength(0);
    expect(fake.embeddingCalls().at(-1)?.input).toEqual(["Herons wait in the shallows."]);
  });

  it("too long whole, is embedded by its first 500 characters", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    fake.maxInputTokens = 200;
    await t.sayMany(th, [LONG, "Otters float on their backs."]);
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    expect(await vectorsOf(th)).toEqual([
      ["Kestrels", true],
      ["Otters", true],
    ]);
    expect(fake.embeddingCalls().map((c) => c.input)).toContainEqual([LONG.slice(0, 500)]);
  });

  it("a provider refusing every request (a setting, not a message): the batch waits for a later run, no message given up", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    await t.sayMany(th, ["Puffins nest in burrows.", "Otters float on their backs."]);
    fake.fail({ status: 400, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    expect(await vectorsOf(th)).toEqual([
      ["Puffins", false],
      ["Otters", false],
    ]);
    expect(await jobsOf(th)).toEqual([{ attempts: 1 }]);
    fake.clearFailures();
    clock.advance(10 * 60_000);
    await runDueJobs(svc.deps);
    expect(await vectorsOf(th)).toEqual([
      ["Puffins", true],
      ["Otters", true],
    ]);
    expect(await jobsOf(th)).toEqual([]);
  });
});

describe("a very long word", () => {
  it("in a dataset with a long multi-byte name, stays out of the index: the thread's messages are counted and embedded", async () => {
    // 256 CJK characters: 768 bytes of the statistics' key before the term.
    const dataset = Array.from({ length: 256 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join("");
    const t = await tenant(svc, dataset);
    const th = await t.thread();
    let seed = 7;
    const letter = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return String.fromCharCode(97 + (seed % 26));
    };
    const hash = Array.from({ length: 2_040 }, letter).join("");
    await t.sayMany(th, [`Puffins nest in burrows ${hash}`, "Otters float on their backs."]);
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    const [state] = rowsOf<{ vectors: number; jobs: number; longest: number }>(
      await svc.deps.db.execute(sql`SELECT
        (SELECT count(*)::int FROM message_vectors WHERE thread_id = ${th}) AS vectors,
        (SELECT count(*)::int FROM jobs WHERE key = ${`embed:${th}`}) AS jobs,
        (SELECT max(octet_length(term))::int FROM message_terms WHERE project_id = ${t.projectId}) AS longest`),
    );
    expect(state).toEqual({ vectors: 2, jobs: 0, longest: expect.any(Number) });
    expect(state.longest).toBeLessThan(100);
    expect(await t.recall("puffins")).toHaveLength(2);
    await expectExact(svc, t.projectId, 0);
  });
});

describe("a forgotten fact's messages", () => {
  it("leave the index whatever Unicode space they have where the quote has a space, as recall compares them", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    const nbsp = await t.say(th, "I live\u00a0in Lisbon with my cat");
    const ideographic = await t.say(th, "Yes, I\u3000live in\u202fLisbon.");
    const other = await t.say(th, "Lisbon has trams.");
    await t.forget("I live in Lisbon");
    const [left] = rowsOf<{ ids: string[] | null }>(
      await svc.deps.db.execute(sql`SELECT array_agg(message_id ORDER BY message_id) AS ids FROM message_search
        WHERE message_id IN (${nbsp}, ${ideographic}, ${other})`),
    );
    expect(left.ids).toEqual([other]);
    expect(await t.recall("Lisbon")).toEqual([other]);
  });
});

describe("recall before the count", () => {
  it("finds a message by a word the statistics do not hold yet, and ranks it by that word", async () => {
    const t = await tenant(svc);
    const th = await t.thread();
    for (let i = 0; i < 4; i++) await t.say(th, `The river was high on day ${i}.`);
    // Counted, not embedded (the provider fails): the ranking below is the keyword signal's alone.
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    clock.advance(EMBED_MAX_WAIT_MS);
    await runDueJobs(svc.deps);
    fake.clearFailures();
    const counted = await expectExact(svc, t.projectId, 0);
    expect(counted.find((r) => r.term === "river")).toMatchObject({ docs: 4 });
    const otter = await t.say(th, "A river otter slid down the bank.");
    expect(await t.recall("otter")).toEqual([otter]);
    const both = await t.recall("river otter");
    expect(both[0]).toBe(otter);
    expect(both).toHaveLength(5);
    clock.advance(10 * 60_000); // past the job's backoff: it counts and embeds the rest
    await runDueJobs(svc.deps);
    expect((await expectExact(svc, t.projectId, 0)).find((r) => r.term === "otter")).toMatchObject({ docs: 1 });
  });
});

/**
 * A job's count and a deletion of the same rows, in two transactions at once (a server: PGlite
 * has one connection). The UPDATE that counts and the DELETE serialize on the row's lock: the
 * DELETE that waited subtracts the row the count left (terms_counted true); a row a deletion holds
 * is skipped by the count, and stays uncounted if the deletion rolls back.
 */
describe.runIf(testPgUrl())("concurrent with a deletion (PostgreSQL server)", () => {
  const { clients, run, waitsForLock: blocked } = useServerConnections(3);
  let job: pg.Client;
  let deleter: pg.Client;
  let observer: pg.Client;

  beforeAll(() => {
    [job, deleter, observer] = clients;
  });

  const count = (client: pg.Client, threadId: string) =>
    run(client, sql`WITH ${countThreadTermsCtes(threadId, EMBED_BATCH)} SELECT count(*)::int AS n FROM counted`).then(
      (r) => r.rows[0].n as number,
    );

  /** A project, its thread and messages with their index rows as an append leaves them (uncounted). */
  async function seed(words: string[]) {
    const project = `prj_${randomUUID().slice(0, 8)}`;
    const thread = `thr_${randomUUID().slice(0, 8)}`;
    await run(observer, sql`INSERT INTO projects (id, name) VALUES (${project}, 'terms')`);
    await run(observer, sql`INSERT INTO threads (id, project_id, dataset) VALUES (${thread}, ${project}, 'ds')`);
    const ids: string[] = [];
    for (const text of words) ids.push(await addRow(project, thread, text));
    return { project, thread, ids };
  }

  async function addRow(project: string, thread: string, text: string) {
    const id = `msg_${randomUUID().slice(0, 8)}`;
    // The message, numbered as an append numbers it (its thread's next sequence number), and its row.
    await run(
      observer,
      sql`WITH th AS (UPDATE threads SET last_seq = last_seq + 1 WHERE id = ${thread} RETURNING last_seq),
        m AS (INSERT INTO messages (id, project_id, thread_id, seq, role, content)
          SELECT ${id}, ${project}, ${thread}, th.last_seq, 'user', ${text} FROM th)
        INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search)
        VALUES (${id}, ${project}, ${thread}, 'ds', now(), to_tsvector('english', ${text}))`,
    );
    return id;
  }

  async function exact(project: string) {
    const kept = await run(observer, KEPT(project));
    const recount = await run(observer, RECOUNT(project));
    expect(kept.rows).toEqual(recount.rows);
    return kept.rows as TermRow[];
  }

  it("a deletion that waited for the count subtracts what the count added", async () => {
    const { project, thread, ids } = await seed(["gannets dive", "gannets nest", "terns nest"]);
    const waiting = await blocked(deleter);
    await job.query("BEGIN");
    expect(await count(job, thread)).toBe(3);
    const deletion = run(deleter, sql`DELETE FROM message_search WHERE message_id = ${ids[0]}`);
    await waiting();
    await job.query("COMMIT");
    await deletion;
    const kept = await exact(project);
    expect(kept.find((r) => r.term === "")).toMatchObject({ docs: 2 });
    expect(kept.find((r) => r.term === "gannet")).toMatchObject({ docs: 1 });
  });

  it("a count skips the rows a deletion holds: deleted, never counted; rolled back, counted by the next run", async () => {
    const { project, thread, ids } = await seed(["puffins dive", "puffins nest", "auks nest"]);
    await deleter.query("BEGIN");
    await run(deleter, sql`DELETE FROM message_search WHERE message_id = ${ids[0]}`);
    expect(await count(job, thread)).toBe(2);
    await deleter.query("COMMIT");
    expect((await exact(project)).find((r) => r.term === "")).toMatchObject({ docs: 2 });

    const late = await addRow(project, thread, "puffins again");
    await deleter.query("BEGIN");
    await run(deleter, sql`DELETE FROM message_search WHERE message_id = ${late}`);
    expect(await count(job, thread)).toBe(0);
    await deleter.query("ROLLBACK");
    expect((await exact(project)).find((r) => r.term === "puffin")).toMatchObject({ docs: 1 });
    expect(await count(job, thread)).toBe(1);
    expect((await exact(project)).find((r) => r.term === "puffin")).toMatchObject({ docs: 2 });
  });

  it("the embedding batch stops below a row the count skipped, so the thread's mark never passes it", async () => {
    const { thread, ids } = await seed(["kittiwakes dive", "kittiwakes nest", "fulmars nest"]);
    const batch = async () => {
      const r = await run(job, countAndReadBatchSql(thread));
      const pending = r.rows[0].pending as { id: string }[] | string | null;
      return (typeof pending === "string" ? (JSON.parse(pending) as { id: string }[]) : (pending ?? [])).map(
        (m) => m.id,
      );
    };
    await deleter.query("BEGIN");
    await run(deleter, sql`DELETE FROM message_search WHERE message_id = ${ids[1]}`);
    // The first is counted and read; the second is held, so the batch ends before it and the third.
    expect(await batch()).toEqual([ids[0]]);
    await deleter.query("ROLLBACK");
    // The next run counts the one left and reads all three (none has a vector yet).
    expect(await batch()).toEqual(ids);
    const counted = await run(
      observer,
      sql`SELECT count(*)::int AS n FROM message_search WHERE thread_id = ${thread} AND terms_counted`,
    );
    expect(counted.rows[0].n).toBe(3);
  });

  it("a thread's deletion and a count of it, in either order", async () => {
    const first = await seed(["shags dry their wings", "shags again"]);
    const waiting = await blocked(deleter);
    await job.query("BEGIN");
    expect(await count(job, first.thread)).toBe(2);
    const deletion = run(deleter, sql`DELETE FROM threads WHERE id = ${first.thread}`);
    await waiting();
    await job.query("COMMIT");
    await deletion;
    expect(await exact(first.project)).toEqual([]);

    const second = await seed(["cormorants dry their wings"]);
    const counting = await blocked(job);
    await deleter.query("BEGIN");
    await run(deleter, sql`DELETE FROM threads WHERE id = ${second.thread}`);
    const counted = count(job, second.thread);
    await counting();
    await deleter.query("COMMIT");
    expect(await counted).toBe(0);
    expect(await exact(second.project)).toEqual([]);
  });
});

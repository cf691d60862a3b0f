import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { answerScope, claimKey, storeResponse } from "../../lib/idempotency";
import { runDueJobs } from "../../lib/jobs/runner";
import { EXPORT_PAGE_BYTES, EXPORT_PAGE_ROWS } from "../../lib/recall/dataset";
import type { ApiSchema } from "../helpers/api-types";
import { gate, type Tenant } from "../helpers/episodic-fixtures";
import { fact, useSemanticService } from "../helpers/semantic-fixtures";
import { adminSession } from "../helpers/service";

/**
 * Dataset export and erase (GET /v1/memory/recall/datasets/:dataset/export, DELETE
 * /v1/memory/recall/datasets/:dataset) on rows made by the real paths: messages over HTTP,
 * episodes and facts through the job pipeline with a scripted provider.
 */
/** The statements of the threads walk (threads with their messages) while `recording`. */
const threadPages: string[] = [];
let recording = false;
const { h, tenant, extract } = useSemanticService({
  onQuery: (statement) => {
    if (recording && statement.includes("page_rows")) threadPages.push(statement);
  },
});
const db = () => h.svc.deps.db;
const enc = encodeURIComponent;
const DATASET = "team/α b?#%&";

type Export = ApiSchema<"DatasetExport">;

async function exportOf(t: Tenant, dataset = DATASET) {
  const res = await t.get(`/v1/memory/recall/datasets/${enc(dataset)}/export`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("application/json");
  return (await res.json()) as Export;
}

async function erase(t: Tenant, dataset = DATASET) {
  const res = await t.get(`/v1/memory/recall/datasets/${enc(dataset)}`, { method: "DELETE" });
  expect(res.status).toBe(200);
  return (await res.json()) as { dataset: string; deleted: Record<string, number> };
}

async function counts(projectId: string, dataset: string) {
  const [row] = rowsOf<Record<string, number | string>>(
    await db().execute(sql`
      SELECT (SELECT count(*) FROM threads WHERE project_id = ${projectId} AND dataset = ${dataset}) AS threads,
        (SELECT count(*) FROM messages m JOIN threads t ON t.id = m.thread_id
          WHERE t.project_id = ${projectId} AND t.dataset = ${dataset}) AS messages,
        (SELECT count(*) FROM episodes WHERE project_id = ${projectId} AND dataset = ${dataset}) AS episodes,
        (SELECT count(*) FROM facts WHERE project_id = ${projectId} AND dataset = ${dataset}) AS facts,
        (SELECT count(*) FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id
          WHERE f.project_id = ${projectId} AND f.dataset = ${dataset}) AS links,
        (SELECT count(*) FROM entities WHERE project_id = ${projectId} AND dataset = ${dataset}) AS entities,
        (SELECT count(*) FROM jobs WHERE project_id = ${projectId} AND dataset = ${dataset}) AS jobs,
        (SELECT count(*) FROM message_search WHERE project_id = ${projectId} AND dataset = ${dataset}) AS indexed,
        (SELECT count(*) FROM fact_terms WHERE project_id = ${projectId} AND dataset = ${dataset}) AS fact_terms,
        (SELECT count(*) FROM message_terms WHERE project_id = ${projectId} AND dataset = ${dataset}) AS message_terms`),
  );
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)]));
}

const extraction = {
  facts: [
    fact("works_at", "Acme Corp", "I work at Acme Corp", { objectIsEntity: true }),
    fact("lives_in", "Lisbon", "I live in Lisbon", { objectIsEntity: true }),
  ],
  entities: [
    { name: "Acme Corp", type: "ORG" as const },
    { name: "Lisbon", type: "PLACE" as const },
  ],
};

describe("export and erase round trip", () => {
  it("exports everything of the dataset, then erases exactly it in one go", async () => {
    const t = await tenant("export");
    const other = await tenant("export-other");
    const { threadId, episodeId } = await extract(
      t,
      ["I work at Acme Corp", "Great!", "I live in Lisbon", "Lovely city."],
      extraction,
      { dataset: DATASET },
    );
    // An open thread with messages (its idle job pending), an empty thread, a superseded fact.
    h.clock.advance(1000);
    const open = await t.thread(DATASET);
    await t.say(open, "Still talking");
    h.clock.advance(1000);
    const empty = await t.thread(DATASET);
    const facts = await t.get(`/v1/memory/semantic/datasets/${enc(DATASET)}/facts`);
    const [firstFact] = ((await facts.json()) as { facts: { factId: string }[] }).facts;
    await t.get(`/v1/memory/semantic/datasets/${enc(DATASET)}/facts/${firstFact.factId}`, { method: "DELETE" });
    // Rows that must survive: another dataset of the project, the same dataset name elsewhere.
    await extract(t, ["I work at Acme Corp"], extraction, { dataset: "kept" });
    await extract(other, ["I work at Acme Corp"], extraction, { dataset: DATASET });

    const doc = await exportOf(t);
    expect(Object.keys(doc)).toEqual(["dataset", "exportedAt", "threads", "episodes", "facts", "entities"]);
    expect(doc.dataset).toBe(DATASET);
    expect(doc.exportedAt).toBe(h.clock.now().toISOString());
    expect(doc.threads.map((th) => th.threadId)).toEqual([threadId, open, empty]);
    expect(doc.threads[0].messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "I work at Acme Corp"],
      ["assistant", "Great!"],
      ["user", "I live in Lisbon"],
      ["assistant", "Lovely city."],
    ]);
    expect(doc.threads[0]).toMatchObject({ tags: [], createdAt: expect.any(String) });
    expect(doc.threads[0].messages[0].createdAt).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT/));
    expect(doc.threads[1].messages.map((m) => m.content)).toEqual(["Still talking"]);
    expect(doc.threads[2].messages).toEqual([]);
    expect(doc.episodes.map((e) => [e.episodeId, e.status, e.threadId])).toEqual([[episodeId, "completed", threadId]]);
    expect(doc.episodes[0]).toMatchObject({ summary: expect.any(String), keyLearnings: expect.any(Array) });
    expect(doc.facts.map((f) => [f.object, f.invalidAt === null])).toEqual(
      expect.arrayContaining([
        ["Acme Corp", expect.any(Boolean)],
        ["Lisbon", expect.any(Boolean)],
      ]),
    );
    expect(doc.facts.filter((f) => f.invalidAt !== null).map((f) => f.factId)).toEqual([firstFact.factId]);
    expect(Object.keys(doc.facts[0]).sort()).toEqual(
      [
        "confidence",
        "episodeId",
        "factId",
        "invalidAt",
        "object",
        "objectIsEntity",
        "predicate",
        "sourceQuote",
        "subject",
        "validAt",
        "validUntil",
      ].sort(),
    );
    expect(doc.entities).toEqual(
      expect.arrayContaining([
        { name: "Acme Corp", type: "ORG" },
        { name: "Lisbon", type: "PLACE" },
      ]),
    );
    expect(doc.entities).toHaveLength(2);

    // Recall sees the dataset before the erase.
    const before = await t.get("/v1/memory/recall", {
      method: "POST",
      json: { dataset: DATASET, query: "where do I work" },
    });
    expect(((await before.json()) as { factCount: number }).factCount).toBeGreaterThan(0);

    const keptBefore = await counts(t.projectId, "kept");
    const otherBefore = await counts(other.projectId, DATASET);
    expect(await counts(t.projectId, DATASET)).toMatchObject({ threads: 3, messages: 5, episodes: 1, jobs: 3 });
    expect((await counts(t.projectId, DATASET)).indexed).toBeGreaterThan(0);
    // The dataset's words, counted for the keyword ranking of its facts and messages.
    expect(await counts(t.projectId, DATASET)).toMatchObject({
      fact_terms: expect.toSatisfy((n: number) => n > 0),
      message_terms: expect.toSatisfy((n: number) => n > 0),
    });

    expect(await erase(t)).toEqual({ dataset: DATASET, deleted: { threads: 3, episodes: 1, facts: 2, entities: 2 } });
    expect(await counts(t.projectId, DATASET)).toEqual({
      threads: 0,
      messages: 0,
      episodes: 0,
      facts: 0,
      links: 0,
      entities: 0,
      jobs: 0,
      indexed: 0,
      // Gone with them: no word of the erased dataset stays behind, not even at a count of zero.
      fact_terms: 0,
      message_terms: 0,
    });
    expect(await counts(t.projectId, "kept")).toEqual(keptBefore);
    expect(await counts(other.projectId, DATASET)).toEqual(otherBefore);

    expect(await exportOf(t)).toMatchObject({ threads: [], episodes: [], facts: [], entities: [] });
    const after = await t.get("/v1/memory/recall", {
      method: "POST",
      json: { dataset: DATASET, query: "where do I work" },
    });
    expect(await after.json()).toMatchObject({ context: "", factCount: 0 });
    expect((await t.get(`/v1/threads/${threadId}`)).status).toBe(404);
    expect((await t.get(`/v1/memory/episodic/episodes/${episodeId}`)).status).toBe(404);
    // Nothing left to run for the dataset, and a second erase finds nothing.
    await runDueJobs(h.svc.deps);
    expect(await counts(t.projectId, DATASET)).toMatchObject({ episodes: 0, facts: 0 });
    expect(await erase(t)).toEqual({ dataset: DATASET, deleted: { threads: 0, episodes: 0, facts: 0, entities: 0 } });
  });

  it("erases the copies of its text too: stored Idempotency-Key answers and webhook deliveries", async () => {
    const t = await tenant("erase-copies");
    const session = await adminSession(h.svc);
    const endpoint = await h.svc.request("/dashboard/webhooks", {
      method: "POST",
      token: session,
      // Never reached: its deliveries stay pending, due for their next attempt.
      json: { projectId: t.projectId, url: "https://hooks.example.com/x", eventTypes: ["episode.completed"] },
    });
    expect(endpoint.status).toBe(201);
    const keyed = (path: string, key: string, json: unknown, method = "POST") =>
      t.get(path, { method, json, headers: { "Idempotency-Key": key } });
    const created = await keyed("/v1/threads", "create", { dataset: DATASET, tags: ["zorbtag"] });
    expect(created.status).toBe(201);
    const { threadId } = (await created.json()) as { threadId: string };
    const said = await keyed(`/v1/memory/working/threads/${threadId}/messages`, "say", {
      role: "user",
      content: "I work at Acme Corp",
    });
    expect(said.status).toBe(201);
    h.fake.onStructured("episode_summary", () => ({ summary: "The user works at Acme Corp.", keyLearnings: [] }));
    const ended = await keyed(`/v1/threads/${threadId}/end`, "end", {});
    const { episodeId } = (await ended.json()) as { episodeId: string };
    await runDueJobs(h.svc.deps);
    expect(
      (await keyed("/v1/memory/recall", "recall", { dataset: DATASET, query: "Acme", include: ["messages"] })).status,
    ).toBe(200);
    expect((await keyed(`/v1/memory/episodic/episodes/${episodeId}`, "archive", undefined, "DELETE")).status).toBe(200);
    // Another dataset's answer stays.
    expect((await keyed("/v1/threads", "kept", { dataset: "kept" })).status).toBe(201);

    const copies = async () => {
      const [row] = rowsOf<Record<string, number>>(
        await db().execute(sql`
          SELECT (SELECT count(*) FROM idempotency_keys WHERE project_id = ${t.projectId}) AS answers,
            (SELECT count(*) FROM webhook_deliveries WHERE project_id = ${t.projectId}) AS deliveries,
            (SELECT count(*) FROM jobs WHERE project_id = ${t.projectId} AND kind = 'webhook') AS delivery_jobs,
            (SELECT count(*) FROM idempotency_keys WHERE project_id = ${t.projectId}
              AND (response_body LIKE '%Acme%' OR response_body LIKE '%zorbtag%')) AS quoting`),
      );
      return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)]));
    };
    expect(await copies()).toEqual({ answers: 6, deliveries: 1, delivery_jobs: 1, quoting: 2 });
    // A keyed recall still running (it read the dataset before the erase): its claim goes too, so
    // the answer it stores afterwards is stored nowhere.
    const running = await claimKey(h.svc.deps, {
      projectId: t.projectId,
      key: "in-flight",
      fingerprint: "f",
      scope: answerScope("POST", "/v1/memory/recall", new TextEncoder().encode(JSON.stringify({ dataset: DATASET }))),
    });
    expect(running.kind).toBe("claimed");
    await erase(t);
    if (running.kind === "claimed") {
      await storeResponse(h.svc.deps, running.claim, { status: 200, body: "Acme", contentType: "application/json" });
    }
    expect(await copies()).toEqual({ answers: 1, deliveries: 0, delivery_jobs: 0, quoting: 0 });
    // The key is free: the same request runs again instead of replaying the erased thread.
    const again = await keyed("/v1/threads", "create", { dataset: DATASET, tags: ["zorbtag"] });
    expect([again.status, again.headers.get("idempotent-replayed")]).toEqual([201, null]);
    const kept = await keyed("/v1/threads", "kept", { dataset: "kept" });
    expect(kept.headers.get("idempotent-replayed")).toBe("true");
  });

  it("an unknown dataset exports empty and erases with zero counts", async () => {
    const t = await tenant("export-empty");
    expect(await exportOf(t, "never-written")).toMatchObject({
      dataset: "never-written",
      threads: [],
      episodes: [],
      facts: [],
      entities: [],
    });
    expect((await erase(t, "never-written")).deleted).toEqual({ threads: 0, episodes: 0, facts: 0, entities: 0 });
  });

  it("400 for a dataset over 256 characters; 401 without a key", async () => {
    const t = await tenant("export-bad");
    expect((await t.get(`/v1/memory/recall/datasets/${"d".repeat(257)}/export`)).status).toBe(400);
    expect((await t.get(`/v1/memory/recall/datasets/${"d".repeat(257)}`, { method: "DELETE" })).status).toBe(400);
    expect((await h.svc.request(`/v1/memory/recall/datasets/ds/export`)).status).toBe(401);
  });

  it("an extraction running while its dataset is erased writes nothing", async () => {
    const t = await tenant("erase-race");
    const threadId = await t.thread(DATASET);
    await t.conversation(threadId, ["I work at Acme Corp", "Nice."]);
    const reached = gate();
    const hold = gate();
    h.fake.onStructured("fact_extraction", async () => {
      reached.open();
      await hold.opened;
      return extraction;
    });
    await t.end(threadId);
    const running = runDueJobs(h.svc.deps);
    await reached.opened;
    expect((await erase(t)).deleted.episodes).toBe(1);
    hold.open();
    await running;
    expect(await counts(t.projectId, DATASET)).toMatchObject({ episodes: 0, facts: 0, entities: 0, links: 0 });
  });
});

describe("export at scale", () => {
  it("pages through more rows than a page holds, in order, without repeats, microsecond ties included", async () => {
    const t = await tenant("export-pages");
    const n = EXPORT_PAGE_ROWS * 2 + 37;
    // Three threads created a microsecond apart (a JS Date cannot tell them apart), the middle
    // one empty; messages split over the other two; facts sharing one created_at.
    await db().execute(sql`
      INSERT INTO threads (id, project_id, dataset, created_at, updated_at, last_seq)
      SELECT 'thr_page_' || g, ${t.projectId}, 'big', '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 microsecond',
        now(), 0
      FROM generate_series(1, 3) g`);
    await db().execute(sql`
      INSERT INTO messages (id, project_id, thread_id, seq, role, content)
      SELECT 'msg_page_' || g, ${t.projectId}, CASE WHEN g <= ${n} / 2 THEN 'thr_page_1' ELSE 'thr_page_3' END,
        g, 'user', 'message ' || g
      FROM generate_series(1, ${n}) g`);
    await db().execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, created_at)
      SELECT 'fct_page_' || lpad(g::text, 5, '0'), ${t.projectId}, 'big', 'user', 'likes', 'thing ' || g, 0.9, 'q',
        '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'
      FROM generate_series(1, ${n}) g`);
    const doc = await exportOf(t, "big");
    expect(doc.threads.map((th) => [th.threadId, th.messages.length])).toEqual([
      ["thr_page_1", Math.floor(n / 2)],
      ["thr_page_2", 0],
      ["thr_page_3", n - Math.floor(n / 2)],
    ]);
    const contents = doc.threads.flatMap((th) => th.messages.map((m) => m.content));
    expect(contents).toEqual(Array.from({ length: n }, (_, i) => `message ${i + 1}`));
    expect(doc.facts.map((f) => f.object)).toEqual(Array.from({ length: n }, (_, i) => `thing ${i + 1}`));
  });

  it("pages long messages by their size: no statement reads more than EXPORT_PAGE_BYTES of them, beyond one message", async () => {
    const t = await tenant("export-bytes");
    const size = Math.floor(EXPORT_PAGE_BYTES * 0.35);
    // Seven long messages in one thread (two fit a page), an empty thread, then two short ones.
    await db().execute(sql`
      INSERT INTO threads (id, project_id, dataset, created_at, updated_at, last_seq)
      SELECT 'thr_bytes_' || g, ${t.projectId}, 'long', '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 microsecond',
        now(), 0
      FROM generate_series(1, 3) g`);
    await db().execute(sql`
      INSERT INTO messages (id, project_id, thread_id, seq, role, content)
      SELECT 'msg_bytes_' || g, ${t.projectId}, CASE WHEN g <= 7 THEN 'thr_bytes_1' ELSE 'thr_bytes_3' END, g, 'user',
        CASE WHEN g <= 7 THEN g || repeat(md5(g::text), ${Math.ceil(size / 32)}) ELSE 'short ' || g END
      FROM generate_series(1, 9) g`);
    threadPages.length = 0;
    recording = true;
    const doc = await exportOf(t, "long").finally(() => {
      recording = false;
    });
    expect(doc.threads.map((th) => [th.threadId, th.messages.length])).toEqual([
      ["thr_bytes_1", 7],
      ["thr_bytes_2", 0],
      ["thr_bytes_3", 2],
    ]);
    const contents = doc.threads.flatMap((th) => th.messages.map((m) => m.content));
    expect(contents.slice(0, 7).map((c) => c.length)).toEqual(Array(7).fill(1 + Math.ceil(size / 32) * 32));
    expect(contents.map((c) => c.split("short ")[1] ?? c.slice(0, 1))).toEqual([
      "1",
      "2",
      "3",
      "4",
      "5",
      "6",
      "7",
      "8",
      "9",
    ]);
    // Two long messages a page: [1, 2], [3, 4], [5, 6], [7, the empty thread, 8, 9].
    expect(threadPages).toHaveLength(4);
  });
});

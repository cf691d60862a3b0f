import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { patchProjectSettings } from "../../lib/settings/store";
import type { Body, Issue } from "../helpers/api-types";
import { tableCounts } from "../helpers/db-state";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/** Many messages in one request: `…/threads/{threadId}/messages:batch` and `…/messages:batch`. */
let svc: TestService;
let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake });
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.onText(() => "SUMMARY");
});

const W = "/v1/memory/working";
type Created = Body<"/v1/memory/working/threads/{threadId}/messages", "post", 201>;

/** A tenant (auto-compaction off unless asked) with helpers. */
async function tenant(autoCompactThreshold: number | null = null) {
  const t = await newTenant(svc);
  await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold } });
  const post = (path: string, json: unknown, headers: Record<string, string> = {}) =>
    svc.request(path, { method: "POST", token: t.key, json, headers });
  const thread = async () => {
    const res = await post("/v1/threads", { dataset: "batch" });
    return ((await res.json()) as { threadId: string }).threadId;
  };
  const list = async (threadId: string) => {
    const res = await svc.request(`${W}/threads/${threadId}/messages?limit=100`, { token: t.key });
    return ((await res.json()) as { messages: (Created & { content: string })[] }).messages;
  };
  return { ...t, post, thread, list };
}

const say = (n: number, prefix = "m") =>
  Array.from({ length: n }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `${prefix}${i}` }));

describe("batch add to one thread", () => {
  it("stores the messages in request order with gapless numbers after earlier ones (201)", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    expect((await t.post(`${W}/threads/${threadId}/messages`, { role: "user", content: "first" })).status).toBe(201);
    const res = await t.post(`${W}/threads/${threadId}/messages:batch`, {
      messages: [
        ...say(5),
        { role: "tool", content: "t", tokens: { input: 1 }, model: "m", metadata: { agentName: "a" } },
      ],
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { messages: Created[]; compactedThreadIds: string[] };
    expect(body.compactedThreadIds).toEqual([]);
    expect(body.messages.map((m) => m.sequenceNumber)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(body.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user", "tool"]);
    const listed = await t.list(threadId);
    expect(listed.map((m) => m.content)).toEqual(["first", "m0", "m1", "m2", "m3", "m4", "t"]);
    expect(listed.slice(1).map((m) => m.messageId)).toEqual(body.messages.map((m) => m.messageId));
    expect(listed.at(-1)).toMatchObject({ tokens: { input: 1 }, model: "m", metadata: { agentName: "a" } });
    const stats = await (await svc.request(`${W}/threads/${threadId}/stats`, { token: t.key })).json();
    expect(stats).toMatchObject({ messageCount: 7 });
  });

  it("keeps numbers gapless and each batch contiguous under concurrent batches and single adds", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const results = await Promise.all([
      ...Array.from({ length: 4 }, (_, b) =>
        t.post(`${W}/threads/${threadId}/messages:batch`, { messages: say(10, `b${b}-`) }),
      ),
      ...Array.from({ length: 8 }, (_, i) =>
        t.post(`${W}/threads/${threadId}/messages`, { role: "user", content: `single${i}` }),
      ),
    ]);
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(201));
    const listed = await t.list(threadId);
    expect(listed.map((m) => m.sequenceNumber)).toEqual(Array.from({ length: 48 }, (_, i) => i + 1));
    for (let b = 0; b < 4; b++) {
      const at = listed.findIndex((m) => m.content === `b${b}-0`);
      expect(listed.slice(at, at + 10).map((m) => m.content)).toEqual(say(10, `b${b}-`).map((m) => m.content));
    }
  });

  it("moves a defaulted time up to a later message a concurrent append committed first; a client's own time is checked", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    expect((await t.post(`${W}/threads/${threadId}/messages`, { role: "user", content: "first" })).status).toBe(201);
    // What a concurrent append leaves when it read the clock after this request but committed first.
    const later = new Date(Date.now() + 60_000).toISOString();
    await svc.deps.db.execute(
      sql`UPDATE messages SET created_at = ${later}::timestamptz WHERE thread_id = ${threadId}`,
    );
    await svc.deps.db.execute(sql`UPDATE threads SET last_message_at = ${later}::timestamptz WHERE id = ${threadId}`);

    const res = await t.post(`${W}/threads/${threadId}/messages:batch`, { messages: say(2) });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { messages: Created[] };
    expect(body.messages.map((m) => m.createdAt)).toEqual([later, later]);
    const single = await t.post(`${W}/threads/${threadId}/messages`, { role: "user", content: "next" });
    expect(((await single.json()) as Created).createdAt).toBe(later);
    const listed = await t.list(threadId);
    expect(listed.map((m) => m.createdAt)).toEqual([later, later, later, later]);

    const own = await t.post(`${W}/threads/${threadId}/messages:batch`, {
      messages: [{ role: "user", content: "backfill", createdAt: new Date().toISOString() }],
    });
    expect(own.status).toBe(400);
    expect(((await own.json()) as { issues: Issue[] }).issues[0].path).toEqual(["messages", 0, "createdAt"]);
  });

  it("writes nothing when an item is invalid, naming each by index", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const before = await tableCounts(svc.deps.db);
    const messages = say(8);
    messages[3] = { role: "bot", content: "x" };
    messages[5] = { role: "user", content: "" };
    const res = await t.post(`${W}/threads/${threadId}/messages:batch`, { messages });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; issues: Issue[] };
    expect(body.error).toBe("Validation error");
    expect(body.issues.map((i) => i.path)).toEqual([
      ["messages", 3, "role"],
      ["messages", 5, "content"],
    ]);
    expect(await tableCounts(svc.deps.db)).toEqual(before);
  });

  it("takes 1 to 1,000 messages; 1,001 or none is a 400; a body over 5 MB is a 413", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const path = `${W}/threads/${threadId}/messages:batch`;
    for (const n of [0, 1001]) {
      const res = await t.post(path, { messages: say(n) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { issues: Issue[] }).issues.map((i) => i.path)).toEqual([["messages"]]);
    }
    const full = await t.post(path, { messages: say(1000) });
    expect(full.status).toBe(201);
    expect(((await full.json()) as { messages: Created[] }).messages.at(-1)?.sequenceNumber).toBe(1000);
    // Over the API's 1 MB but under the batch's 5 MB: accepted.
    const big = await t.post(path, { messages: [{ role: "user", content: "x".repeat(3 * 1024 * 1024) }] });
    expect(big.status).toBe(201);
    const before = await tableCounts(svc.deps.db);
    const tooBig = await t.post(path, { messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }] });
    expect(tooBig.status).toBe(413);
    expect(await tooBig.json()).toEqual({ error: "Request body too large (limit 5 MB for a batch)" });
    expect(await tableCounts(svc.deps.db)).toEqual(before);
    // The single-message route keeps its 1 MB.
    const single = await t.post(`${W}/threads/${threadId}/messages`, { role: "user", content: "x".repeat(1100000) });
    expect(single.status).toBe(413);
  });

  it("answers 404 Thread not found for an unknown thread or another project's, writing nothing", async () => {
    const t = await tenant();
    const other = await tenant();
    const theirs = await other.thread();
    const before = await tableCounts(svc.deps.db);
    for (const id of ["thr_unknown", theirs]) {
      const res = await t.post(`${W}/threads/${id}/messages:batch`, { messages: say(2) });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: "Thread not found" });
    }
    expect(await tableCounts(svc.deps.db)).toEqual(before);
  });
});

describe("historical createdAt", () => {
  it("stores it, and the thread's lastMessageAt follows the last one", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const times = ["2024-01-01T10:00:00.000Z", "2024-01-01T10:00:00.000Z", "2024-01-02T08:30:00.000Z"];
    const res = await t.post(`${W}/threads/${threadId}/messages:batch`, {
      messages: times.map((createdAt, i) => ({ role: "user", content: `old${i}`, createdAt })),
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { messages: Created[] };
    expect(body.messages.map((m) => m.createdAt)).toEqual(times);
    expect((await t.list(threadId)).map((m) => m.createdAt)).toEqual(times);
    const thread = await (await svc.request(`/v1/threads/${threadId}`, { token: t.key })).json();
    expect(thread).toMatchObject({ messageCount: 3, lastMessageAt: times[2] });
    // Later items without createdAt are now.
    const now = await t.post(`${W}/threads/${threadId}/messages:batch`, { messages: say(1) });
    expect(now.status).toBe(201);
  });

  it("reads a time in the years 0001-0099 back as it was written, on every route that returns it", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const times = ["0001-01-01T00:00:00.000Z", "0001-01-01T10:00:00.000Z", "0099-12-31T23:59:59.999Z"];
    const res = await t.post(`${W}/threads/${threadId}/messages:batch`, {
      messages: times.map((createdAt, i) => ({ role: "user", content: `ancient${i}`, createdAt })),
    });
    expect(res.status).toBe(201);
    const get = async (path: string) => (await svc.request(path, { token: t.key })).json();
    // The raw statement's Date (stats) and drizzle's column reader (the thread) read it as 0001,
    // not 2001: `new Date` takes the years 0-99 of Postgres's text for 19xx and 20xx.
    expect(await get(`${W}/threads/${threadId}/stats`)).toMatchObject({
      firstMessageAt: times[0],
      lastMessageAt: times[2],
    });
    expect(await get(`/v1/threads/${threadId}`)).toMatchObject({ lastMessageAt: times[2] });
    expect((await t.list(threadId)).map((m) => m.createdAt)).toEqual(times);
    const exported = (await get("/v1/memory/recall/datasets/batch/export")) as {
      threads: { threadId: string; messages: { createdAt: string }[] }[];
    };
    const mine = exported.threads.find((th) => th.threadId === threadId);
    expect(mine?.messages.map((m) => m.createdAt)).toEqual(times);
  });

  it("rejects a time in the future, a decrease within a thread, or one before the thread's last message", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const path = `${W}/threads/${threadId}/messages:batch`;
    const future = new Date(Date.now() + 60_000).toISOString();
    const at = (createdAt: string | undefined, content = "x") => ({ role: "user", content, createdAt });
    const before = await tableCounts(svc.deps.db);
    const bad = await t.post(path, {
      messages: [at("2024-01-02T00:00:00Z"), at("2024-01-01T00:00:00Z"), at(future), at("not a date")],
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { issues: Issue[] }).issues.map((i) => i.path)).toEqual([
      ["messages", 3, "createdAt"],
    ]);
    const rules = await t.post(path, {
      messages: [at("2024-01-02T00:00:00Z"), at("2024-01-01T00:00:00Z"), at(future)],
    });
    expect(rules.status).toBe(400);
    expect(((await rules.json()) as { issues: Issue[] }).issues.map((i) => i.path)).toEqual([
      ["messages", 1, "createdAt"],
      ["messages", 2, "createdAt"],
    ]);
    // An item without createdAt is now: a historical one after it decreases.
    const afterNow = await t.post(path, { messages: [at(undefined), at("2024-01-01T00:00:00Z")] });
    expect(afterNow.status).toBe(400);
    expect(await tableCounts(svc.deps.db)).toEqual(before);

    expect((await t.post(path, { messages: [at("2024-03-01T00:00:00Z")] })).status).toBe(201);
    const early = await t.post(path, { messages: [at("2024-03-01T00:00:00Z"), at("2024-02-01T00:00:00Z")] });
    expect(early.status).toBe(400);
    const earlier = await t.post(path, { messages: [at("2024-02-01T00:00:00Z"), at("2024-02-02T00:00:00Z")] });
    expect(earlier.status).toBe(400);
    const issues = ((await earlier.json()) as { issues: Issue[] }).issues;
    expect(issues.map((i) => i.path)).toEqual([
      ["messages", 0, "createdAt"],
      ["messages", 1, "createdAt"],
    ]);
    expect(issues[0].message).toMatch(/before the thread's last message \(2024-03-01T00:00:00.000Z\)/);
    expect((await t.list(threadId)).map((m) => m.content)).toEqual(["x"]);
  });
});

describe("across threads", () => {
  it("numbers each thread's items in request order, and writes nothing when one thread is unknown", async () => {
    const t = await tenant();
    const [a, b] = [await t.thread(), await t.thread()];
    await t.post(`${W}/threads/${b}/messages`, { role: "user", content: "b-first" });
    const items = [a, b, a, a, b].map((threadId, i) => ({ threadId, role: "user", content: `c${i}` }));
    const res = await t.post(`${W}/messages:batch`, { messages: items });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { messages: Created[] };
    expect(body.messages.map((m) => [m.threadId, m.sequenceNumber])).toEqual([
      [a, 1],
      [b, 2],
      [a, 2],
      [a, 3],
      [b, 3],
    ]);
    expect((await t.list(a)).map((m) => m.content)).toEqual(["c0", "c2", "c3"]);
    expect((await t.list(b)).map((m) => m.content)).toEqual(["b-first", "c1", "c4"]);

    const before = await tableCounts(svc.deps.db);
    const other = await tenant();
    const theirs = await other.thread();
    const after = await tableCounts(svc.deps.db);
    for (const missing of ["thr_unknown", theirs]) {
      const bad = await t.post(`${W}/messages:batch`, {
        messages: [
          { threadId: a, role: "user", content: "no" },
          { threadId: missing, role: "user", content: "no" },
        ],
      });
      expect(bad.status).toBe(404);
      expect(await bad.json()).toEqual({ error: "Thread not found" });
    }
    expect(await tableCounts(svc.deps.db)).toEqual(after);
    expect(before.messages).toBe(after.messages);
    const invalid = await t.post(`${W}/messages:batch`, { messages: [{ role: "user", content: "x" }] });
    expect(((await invalid.json()) as { issues: Issue[] }).issues.map((i) => i.path)).toEqual([
      ["messages", 0, "threadId"],
    ]);
  });
});

describe("once per thread", () => {
  it("arms one idle timer and one embedding job per thread and compacts once per thread that crossed the threshold", async () => {
    const t = await tenant(10);
    const [a, b] = [await t.thread(), await t.thread()];
    const ringsBefore = svc.rings.length;
    const items = [...say(25).map((m) => ({ ...m, threadId: a })), ...say(5).map((m) => ({ ...m, threadId: b }))];
    const res = await t.post(`${W}/messages:batch`, { messages: items });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { compactedThreadIds: string[] }).compactedThreadIds).toEqual([a]);
    expect(fake.chatCalls()).toHaveLength(1); // a crossed 10 and 20: one compaction; b did not
    await svc.settle();
    const jobs = rowsOf<{ key: string }>(
      await svc.deps.db.execute(sql`SELECT key FROM jobs WHERE key IN (${`idle:${a}`}, ${`idle:${b}`}) ORDER BY key`),
    );
    expect(jobs.map((j) => j.key).sort()).toEqual([`idle:${a}`, `idle:${b}`].sort());
    expect(
      svc.rings
        .slice(ringsBefore)
        .map((r) => r.key)
        .sort(),
    ).toEqual([`idle:${a}`, `idle:${b}`, `embed:${a}`, `embed:${b}`].sort());
  });

  it("stores the batch when the auto-compaction fails (the provider)", async () => {
    const t = await tenant(10);
    const threadId = await t.thread();
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    try {
      const res = await t.post(`${W}/threads/${threadId}/messages:batch`, { messages: say(12) });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { compactedThreadIds: string[] }).compactedThreadIds).toEqual([]);
      expect(await t.list(threadId)).toHaveLength(12);
    } finally {
      fake.clearFailures();
    }
  });
});

describe("Idempotency-Key", () => {
  it("replays a batch without writing it twice", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    const path = `${W}/threads/${threadId}/messages:batch`;
    const headers = { "Idempotency-Key": "batch-1" };
    const first = await t.post(path, { messages: say(3) }, headers);
    expect(first.status).toBe(201);
    const firstBody = await first.json();
    const again = await t.post(path, { messages: say(3) }, headers);
    expect(again.status).toBe(201);
    expect(again.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await again.json()).toEqual(firstBody);
    expect(await t.list(threadId)).toHaveLength(3);
  });
});

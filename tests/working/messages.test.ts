import { count, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messages, threads } from "../../lib/db/schema";
import type { ApiSchema, Body, ValidationError } from "../helpers/api-types";
import { createTestService, newTenant, type TestService } from "../helpers/service";

let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc.close());

type Role = Message["role"];
type Added = Body<"/v1/memory/working/threads/{threadId}/messages", "post", 201>;
type Message = ApiSchema<"Message">;
type Page = Body<"/v1/memory/working/threads/{threadId}/messages", "get", 200>;
type Prepared = Body<"/v1/memory/working/threads/{threadId}/prepare", "post", 200>;
type Stats = Body<"/v1/memory/working/threads/{threadId}/stats", "get", 200>;

const W = "/v1/memory/working/threads";

async function body<T>(res: Response): Promise<T> {
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  return (await res.json()) as T;
}

async function tenantWithThread(dataset = "chat") {
  const t = await newTenant(svc);
  const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset } });
  expect(res.status).toBe(201);
  const { threadId } = await body<{ threadId: string }>(res);
  return { ...t, threadId };
}

function add(token: string, threadId: string, json: unknown) {
  return svc.request(`${W}/${threadId}/messages`, { method: "POST", token, json });
}

async function addOk(token: string, threadId: string, json: unknown) {
  const res = await add(token, threadId, json);
  expect(res.status).toBe(201);
  return body<Added>(res);
}

async function addMany(token: string, threadId: string, n: number, role: Role = "user") {
  const out: Added[] = [];
  for (let i = 1; i <= n; i++) out.push(await addOk(token, threadId, { role, content: `m${i}` }));
  return out;
}

async function list(token: string, threadId: string, query = "") {
  return svc.request(`${W}/${threadId}/messages${query}`, { token });
}

async function listOk(token: string, threadId: string, query = "") {
  const res = await list(token, threadId, query);
  expect(res.status).toBe(200);
  return body<Page>(res);
}

async function messageRows(threadId: string) {
  const [{ n }] = await svc.deps.db.select({ n: count() }).from(messages).where(eq(messages.threadId, threadId));
  return n;
}

async function lastSeq(threadId: string) {
  const [row] = await svc.deps.db.select({ lastSeq: threads.lastSeq }).from(threads).where(eq(threads.id, threadId));
  return row.lastSeq;
}

function expectValidationAt(b: ValidationError, path: (string | number)[]) {
  expect(b.error).toBe("Validation error");
  const paths = b.issues.map((i) => JSON.stringify(i.path));
  expect(paths).toContain(JSON.stringify(path));
}

describe("add message", () => {
  it("returns 201 with the stored message's id, sequence number and time", async () => {
    const t = await tenantWithThread();
    const before = Date.now();
    const res = await add(t.key, t.threadId, { role: "user", content: "hello" });
    expect(res.status).toBe(201);
    const added = await body<Added>(res);
    expect(Object.keys(added).sort()).toEqual(
      ["compacted", "createdAt", "messageId", "role", "sequenceNumber", "threadId"].sort(),
    );
    expect(added.messageId).toMatch(/^msg_[0-9a-z]{20}$/);
    expect(added.threadId).toBe(t.threadId);
    expect(added.sequenceNumber).toBe(1);
    expect(added.role).toBe("user");
    expect(added.compacted).toBe(false);
    expect(new Date(added.createdAt).toISOString()).toBe(added.createdAt);
    expect(Date.parse(added.createdAt)).toBeGreaterThanOrEqual(before - 1000);

    const page = await listOk(t.key, t.threadId);
    expect(page.total).toBe(1);
    expect(page.messages[0]).toMatchObject({
      messageId: added.messageId,
      threadId: t.threadId,
      sequenceNumber: 1,
      role: "user",
      content: "hello",
      createdAt: added.createdAt,
      compactedAt: null,
      tokens: null,
      model: null,
      latencyMs: null,
      metadata: null,
    });
  });

  it("numbers messages 1, 2, 3 in insert order", async () => {
    const t = await tenantWithThread();
    const added = await addMany(t.key, t.threadId, 3);
    expect(added.map((a) => a.sequenceNumber)).toEqual([1, 2, 3]);
    expect(new Set(added.map((a) => a.messageId)).size).toBe(3);
  });

  it("keeps sequence numbers per thread", async () => {
    const t = await tenantWithThread();
    const other = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "chat" } });
    const otherId = (await body<{ threadId: string }>(other)).threadId;
    await addMany(t.key, t.threadId, 2);
    const first = await addOk(t.key, otherId, { role: "user", content: "x" });
    expect(first.sequenceNumber).toBe(1);
  });

  it.each(["user", "assistant", "system", "tool"] as const)("accepts role %s", async (role) => {
    const t = await tenantWithThread();
    const added = await addOk(t.key, t.threadId, { role, content: `as ${role}` });
    expect(added.role).toBe(role);
    const page = await listOk(t.key, t.threadId);
    expect(page.messages.map((m) => [m.role, m.content])).toEqual([[role, `as ${role}`]]);
  });

  it.each([
    ["an unknown role", { role: "bot", content: "x" }, ["role"]],
    ["an upper-case role", { role: "USER", content: "x" }, ["role"]],
    ["a missing role", { content: "x" }, ["role"]],
    ["empty content", { role: "user", content: "" }, ["content"]],
    ["missing content", { role: "user" }, ["content"]],
    ["non-string content", { role: "user", content: 5 }, ["content"]],
    ["negative tokens", { role: "user", content: "x", tokens: { input: -1 } }, ["tokens", "input"]],
    ["tokens not an object", { role: "user", content: "x", tokens: 12 }, ["tokens"]],
    ["string latencyMs", { role: "user", content: "x", latencyMs: "fast" }, ["latencyMs"]],
    ["non-string model", { role: "user", content: "x", model: 4 }, ["model"]],
    ["non-string stopReason", { role: "user", content: "x", metadata: { stopReason: 1 } }, ["metadata", "stopReason"]],
  ])("rejects %s with 400 and writes nothing", async (_name, json, path) => {
    const t = await tenantWithThread();
    const res = await add(t.key, t.threadId, json);
    expect(res.status).toBe(400);
    expectValidationAt(await body<ValidationError>(res), path);
    expect(await messageRows(t.threadId)).toBe(0);
    expect(await lastSeq(t.threadId)).toBe(0);
    expect((await listOk(t.key, t.threadId)).total).toBe(0);
    // The counter was not consumed: the next good message is number 1.
    expect((await addOk(t.key, t.threadId, { role: "user", content: "ok" })).sequenceNumber).toBe(1);
  });

  it("stores tokens, model and latencyMs and returns them in the list", async () => {
    const t = await tenantWithThread();
    await addOk(t.key, t.threadId, {
      role: "assistant",
      content: "answer",
      tokens: { input: 12, output: 30, total: 42 },
      model: "gpt-4o-mini",
      latencyMs: 1234,
    });
    await addOk(t.key, t.threadId, { role: "assistant", content: "partial", tokens: { output: 7 }, latencyMs: 12.5 });
    const page = await listOk(t.key, t.threadId);
    expect(page.messages[0]).toMatchObject({
      tokens: { input: 12, output: 30, total: 42 },
      model: "gpt-4o-mini",
      latencyMs: 1234,
    });
    expect(page.messages[1]).toMatchObject({ tokens: { output: 7 }, model: null, latencyMs: 12.5 });
  });

  it("keeps only stopReason and agentName in metadata", async () => {
    const t = await tenantWithThread();
    await addOk(t.key, t.threadId, {
      role: "assistant",
      content: "done",
      metadata: { stopReason: "end_turn", agentName: "planner", userId: "u1", nested: { a: 1 } },
    });
    await addOk(t.key, t.threadId, { role: "user", content: "only junk", metadata: { junk: true } });
    const page = await listOk(t.key, t.threadId);
    expect(page.messages[0].metadata).toEqual({ stopReason: "end_turn", agentName: "planner" });
    // Nothing left after stripping: stored as no metadata at all.
    expect(page.messages[1].metadata).toBeNull();
  });

  it("strips unknown body fields (an old tokenCount) and still succeeds", async () => {
    const t = await tenantWithThread();
    const res = await add(t.key, t.threadId, {
      role: "user",
      content: "hi",
      tokenCount: 99,
      sequenceNumber: 500,
      threadId: "thr_other",
      tokens: { input: 3, cached: 2 },
    });
    expect(res.status).toBe(201);
    const added = await body<Added & Record<string, unknown>>(res);
    expect(added.sequenceNumber).toBe(1);
    expect(added.threadId).toBe(t.threadId);
    expect(added.tokenCount).toBeUndefined();
    const [m] = (await listOk(t.key, t.threadId)).messages;
    expect(m.tokens).toEqual({ input: 3 });
    expect((m as unknown as Record<string, unknown>).tokenCount).toBeUndefined();
  });

  it("stores tokens with only unknown keys as null", async () => {
    const t = await tenantWithThread();
    await addOk(t.key, t.threadId, { role: "user", content: "hi", tokens: { cached: 4 } });
    expect((await listOk(t.key, t.threadId)).messages[0].tokens).toBeNull();
  });

  it.each([
    ["content", { role: "user", content: "a\u0000b" }, ["content"]],
    ["model", { role: "assistant", content: "a", model: "m\u0000" }, ["model"]],
    [
      "metadata.agentName",
      { role: "user", content: "a", metadata: { agentName: "\u0000" } },
      ["metadata", "agentName"],
    ],
    [
      "metadata.stopReason",
      { role: "user", content: "a", metadata: { stopReason: "x\u0000y" } },
      ["metadata", "stopReason"],
    ],
  ])("rejects a NUL character in %s with 400 (Postgres cannot store it), writing nothing", async (_n, json, path) => {
    const t = await tenantWithThread();
    const res = await add(t.key, t.threadId, json);
    expect(res.status).toBe(400);
    expectValidationAt(await body<ValidationError>(res), path);
    expect(await messageRows(t.threadId)).toBe(0);
    expect(await lastSeq(t.threadId)).toBe(0);
  });

  it("rejects telemetry too large to store or sum, so stats keep working", async () => {
    const t = await tenantWithThread();
    for (const json of [
      { role: "user", content: "a", latencyMs: 1e39 },
      { role: "user", content: "a", latencyMs: 2_147_483_648 },
      { role: "user", content: "a", tokens: { input: 1e308 } },
      { role: "user", content: "a", tokens: { total: Number.MAX_SAFE_INTEGER + 2 } },
    ]) {
      const res = await add(t.key, t.threadId, json);
      expect(res.status).toBe(400);
      expect((await body<ValidationError>(res)).error).toBe("Validation error");
    }
    expect(await messageRows(t.threadId)).toBe(0);
    await addOk(t.key, t.threadId, {
      role: "user",
      content: "max",
      latencyMs: 2_147_483_647,
      tokens: { input: Number.MAX_SAFE_INTEGER },
    });
    await addOk(t.key, t.threadId, { role: "user", content: "max", tokens: { input: Number.MAX_SAFE_INTEGER } });
    const stats = await svc.request(`${W}/${t.threadId}/stats`, { token: t.key });
    expect(stats.status).toBe(200);
    expect((await body<Stats>(stats)).tokens.input).toBe(Number.MAX_SAFE_INTEGER * 2);
  });

  it("keeps content exactly, unicode and whitespace included", async () => {
    const t = await tenantWithThread();
    const content = '  ünïcødé 🚀 \n line two\t"quoted" \\ back ';
    await addOk(t.key, t.threadId, { role: "user", content });
    expect((await listOk(t.key, t.threadId)).messages[0].content).toBe(content);
  });

  it("answers 404 Thread not found for an unknown thread and writes nothing", async () => {
    const t = await newTenant(svc);
    const res = await add(t.key, "thr_missing", { role: "user", content: "x" });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    const [{ n }] = await svc.deps.db.select({ n: count() }).from(messages).where(eq(messages.projectId, t.projectId));
    expect(n).toBe(0);
  });

  it("answers 404 for another tenant's thread and writes nothing there", async () => {
    const owner = await tenantWithThread();
    const other = await newTenant(svc);
    const res = await add(other.key, owner.threadId, { role: "user", content: "intrusion" });
    expect(res.status).toBe(404);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    expect(await messageRows(owner.threadId)).toBe(0);
    expect(await lastSeq(owner.threadId)).toBe(0);
  });

  it("gives 200 concurrent appends 200 distinct, gapless sequence numbers", async () => {
    const t = await tenantWithThread();
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => add(t.key, t.threadId, { role: "user", content: `c${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(200).fill(201));
    const added = await Promise.all(results.map((r) => body<Added>(r)));
    const seqs = added.map((a) => a.sequenceNumber).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(new Set(added.map((a) => a.messageId)).size).toBe(200);
    const page = await listOk(t.key, t.threadId, "?limit=100");
    expect(page.total).toBe(200);
    expect(await messageRows(t.threadId)).toBe(200);
    expect(await lastSeq(t.threadId)).toBe(200);
    // Each sequence number belongs to the message that was told it.
    const bySeq = new Map(added.map((a) => [a.sequenceNumber, a.messageId]));
    for (const m of page.messages) expect(bySeq.get(m.sequenceNumber)).toBe(m.messageId);
  });
});

describe("list messages", () => {
  it("returns an empty page for a thread without messages", async () => {
    const t = await tenantWithThread();
    expect(await listOk(t.key, t.threadId)).toEqual({ messages: [], total: 0, hasMore: false });
  });

  it("defaults to the 20 newest, oldest first, and says more remain", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 25);
    const page = await listOk(t.key, t.threadId);
    expect(page.total).toBe(25);
    expect(page.hasMore).toBe(true);
    expect(page.messages.map((m) => m.sequenceNumber)).toEqual(Array.from({ length: 20 }, (_, i) => i + 6));
    expect(page.messages.map((m) => m.content)).toEqual(Array.from({ length: 20 }, (_, i) => `m${i + 6}`));
  });

  it("sorts descending with order=desc and ascending with order=asc", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 5);
    const desc = await listOk(t.key, t.threadId, "?order=desc&limit=3");
    expect(desc.messages.map((m) => m.sequenceNumber)).toEqual([5, 4, 3]);
    expect(desc.hasMore).toBe(true);
    const asc = await listOk(t.key, t.threadId, "?order=asc&limit=3");
    expect(asc.messages.map((m) => m.sequenceNumber)).toEqual([3, 4, 5]);
  });

  it("returns only sequence numbers strictly below before", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 10);
    const page = await listOk(t.key, t.threadId, "?before=6&limit=3");
    expect(page.messages.map((m) => m.sequenceNumber)).toEqual([3, 4, 5]);
    expect(page.hasMore).toBe(true);
    expect(page.total).toBe(10);
    const last = await listOk(t.key, t.threadId, "?before=3&limit=3");
    expect(last.messages.map((m) => m.sequenceNumber)).toEqual([1, 2]);
    expect(last.hasMore).toBe(false);
    const none = await listOk(t.key, t.threadId, "?before=1");
    expect(none).toEqual({ messages: [], total: 10, hasMore: false });
    const beyond = await listOk(t.key, t.threadId, "?before=1000&limit=100");
    expect(beyond.messages.map((m) => m.sequenceNumber)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
  });

  it("says hasMore false when the page is exactly the remainder", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 4);
    expect((await listOk(t.key, t.threadId, "?limit=4")).hasMore).toBe(false);
    expect((await listOk(t.key, t.threadId, "?limit=3")).hasMore).toBe(true);
  });

  it.each(["asc", "desc"])("walks every page (order=%s) and sees every message exactly once", async (order) => {
    const t = await tenantWithThread();
    const added = await addMany(t.key, t.threadId, 23);
    const seen: number[] = [];
    let before: number | undefined;
    let pages = 0;
    for (;;) {
      const q = `?limit=5&order=${order}${before === undefined ? "" : `&before=${before}`}`;
      const page = await listOk(t.key, t.threadId, q);
      pages++;
      expect(page.total).toBe(23);
      const seqs = page.messages.map((m) => m.sequenceNumber);
      const sorted = [...seqs].sort((a, b) => (order === "asc" ? a - b : b - a));
      expect(seqs).toEqual(sorted);
      seen.push(...seqs);
      if (!page.hasMore) break;
      before = Math.min(...seqs);
      expect(pages).toBeLessThan(10);
    }
    expect(pages).toBe(5);
    expect(seen.sort((a, b) => a - b)).toEqual(added.map((a) => a.sequenceNumber));
    expect(new Set(seen).size).toBe(23);
  });

  it("accepts the boundaries limit=1 and limit=100", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 3);
    const one = await listOk(t.key, t.threadId, "?limit=1");
    expect(one.messages.map((m) => m.sequenceNumber)).toEqual([3]);
    const hundred = await listOk(t.key, t.threadId, "?limit=100");
    expect(hundred.messages).toHaveLength(3);
  });

  it.each([
    ["limit=0", ["limit"]],
    ["limit=101", ["limit"]],
    ["limit=abc", ["limit"]],
    ["limit=1.5", ["limit"]],
    ["limit=-1", ["limit"]],
    ["limit=", ["limit"]],
    ["before=0", ["before"]],
    ["before=abc", ["before"]],
    ["order=sideways", ["order"]],
    ["order=ASC", ["order"]],
  ])("rejects %s with 400", async (query, path) => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 1);
    const res = await list(t.key, t.threadId, `?${query}`);
    expect(res.status).toBe(400);
    expectValidationAt(await body<ValidationError>(res), path);
  });

  it("coerces digit strings, with surrounding whitespace, to numbers", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 6);
    const page = await listOk(t.key, t.threadId, "?limit=%202%20&before=05");
    expect(page.messages.map((m) => m.sequenceNumber)).toEqual([3, 4]);
  });

  it("answers 404 for an unknown thread and for another tenant's thread", async () => {
    const owner = await tenantWithThread();
    await addMany(owner.key, owner.threadId, 2);
    const other = await newTenant(svc);
    for (const [token, id] of [
      [owner.key, "thr_unknown"],
      [other.key, owner.threadId],
    ]) {
      const res = await list(token, id);
      expect(res.status).toBe(404);
      expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    }
  });
});

describe("prepare", () => {
  function prepare(token: string, threadId: string, init: { query?: string; json?: unknown } = {}) {
    return svc.request(`${W}/${threadId}/prepare${init.query ?? ""}`, { method: "POST", token, json: init.json });
  }
  async function prepareOk(token: string, threadId: string, init: { query?: string; json?: unknown } = {}) {
    const res = await prepare(token, threadId, init);
    expect(res.status).toBe(200);
    return body<Prepared>(res);
  }

  it("returns the window oldest first, with every field", async () => {
    const t = await tenantWithThread("prep-ds");
    await addOk(t.key, t.threadId, { role: "system", content: "be brief" });
    await addOk(t.key, t.threadId, { role: "user", content: "hi", tokens: { input: 2 } });
    await addOk(t.key, t.threadId, { role: "assistant", content: "hello", model: "m" });
    const prepared = await prepareOk(t.key, t.threadId);
    expect(prepared).toEqual({
      threadId: t.threadId,
      dataset: "prep-ds",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" },
      ],
      messageCount: 3,
      truncated: false,
      compacted: false,
    });
  });

  it("returns an empty window for an empty thread", async () => {
    const t = await tenantWithThread("empty");
    const prepared = await prepareOk(t.key, t.threadId);
    expect(prepared).toEqual({
      threadId: t.threadId,
      dataset: "empty",
      messages: [],
      messageCount: 0,
      truncated: false,
      compacted: false,
    });
  });

  it("defaults messageLimit to 20 and marks the window truncated", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 25);
    const prepared = await prepareOk(t.key, t.threadId);
    expect(prepared.messages.map((m) => m.content)).toEqual(Array.from({ length: 20 }, (_, i) => `m${i + 6}`));
    expect(prepared.messageCount).toBe(25);
    expect(prepared.truncated).toBe(true);
  });

  it("is not truncated when the limit covers every message exactly", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 20);
    const prepared = await prepareOk(t.key, t.threadId);
    expect(prepared.messages).toHaveLength(20);
    expect(prepared.truncated).toBe(false);
  });

  it("takes messageLimit from the JSON body", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 6);
    const prepared = await prepareOk(t.key, t.threadId, { json: { messageLimit: 2 } });
    expect(prepared.messages.map((m) => m.content)).toEqual(["m5", "m6"]);
    expect(prepared.messageCount).toBe(6);
    expect(prepared.truncated).toBe(true);
  });

  it("takes messageLimit from the query string", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 6);
    const prepared = await prepareOk(t.key, t.threadId, { query: "?messageLimit=3" });
    expect(prepared.messages.map((m) => m.content)).toEqual(["m4", "m5", "m6"]);
    expect(prepared.truncated).toBe(true);
  });

  it("prefers the body when both carry messageLimit", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 6);
    const prepared = await prepareOk(t.key, t.threadId, { query: "?messageLimit=4", json: { messageLimit: 1 } });
    expect(prepared.messages.map((m) => m.content)).toEqual(["m6"]);
  });

  it("uses the query when the JSON body has no messageLimit", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 6);
    const prepared = await prepareOk(t.key, t.threadId, { query: "?messageLimit=2", json: {} });
    expect(prepared.messages.map((m) => m.content)).toEqual(["m5", "m6"]);
  });

  it("treats a JSON content type with an empty body as no body", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 22);
    for (const b of [undefined, "", "  \n"]) {
      const res = await svc.request(`${W}/${t.threadId}/prepare?messageLimit=4`, {
        method: "POST",
        token: t.key,
        headers: { "content-type": "application/json" },
        body: b,
      });
      expect(res.status).toBe(200);
      expect((await body<Prepared>(res)).messages.map((m) => m.content)).toEqual(["m19", "m20", "m21", "m22"]);
    }
    const res = await svc.request(`${W}/${t.threadId}/prepare`, {
      method: "POST",
      token: t.key,
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(200);
    expect((await body<Prepared>(res)).messages).toHaveLength(20);
  });

  it("still rejects a malformed JSON body", async () => {
    const t = await tenantWithThread();
    const res = await svc.request(`${W}/${t.threadId}/prepare`, {
      method: "POST",
      token: t.key,
      headers: { "content-type": "application/json" },
      body: "{messageLimit:",
    });
    expect(res.status).toBe(400);
    expect(await body<{ error: string }>(res)).toEqual({ error: "Malformed JSON in request body" });
  });

  it("accepts messageLimit 100", async () => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 3);
    const prepared = await prepareOk(t.key, t.threadId, { json: { messageLimit: 100 } });
    expect(prepared.messages).toHaveLength(3);
    expect(prepared.truncated).toBe(false);
  });

  it.each([
    ["body messageLimit 0", { json: { messageLimit: 0 } }],
    ["body messageLimit 101", { json: { messageLimit: 101 } }],
    ["body messageLimit 2.5", { json: { messageLimit: 2.5 } }],
    // A number in the body, as every numeric body field (chat's messageLimit too): only the query is text.
    ['body messageLimit "5"', { json: { messageLimit: "5" } }],
    ["query messageLimit 0", { query: "?messageLimit=0" }],
    ["query messageLimit 101", { query: "?messageLimit=101" }],
    ["query messageLimit abc", { query: "?messageLimit=abc" }],
  ])("rejects %s with 400", async (_name, init) => {
    const t = await tenantWithThread();
    await addMany(t.key, t.threadId, 1);
    const res = await prepare(t.key, t.threadId, init);
    expect(res.status).toBe(400);
    expectValidationAt(await body<ValidationError>(res), ["messageLimit"]);
  });

  it("answers 404 for an unknown thread and another tenant's thread", async () => {
    const owner = await tenantWithThread();
    await addMany(owner.key, owner.threadId, 1);
    const other = await newTenant(svc);
    for (const [token, id] of [
      [owner.key, "thr_unknown"],
      [other.key, owner.threadId],
    ]) {
      const res = await prepare(token, id);
      expect(res.status).toBe(404);
      expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    }
  });
});

describe("stats", () => {
  async function stats(token: string, threadId: string) {
    return svc.request(`${W}/${threadId}/stats`, { token });
  }

  it("is all zero for an empty thread", async () => {
    const t = await tenantWithThread("st");
    const res = await stats(t.key, t.threadId);
    expect(res.status).toBe(200);
    expect(await body<Stats>(res)).toEqual({
      threadId: t.threadId,
      dataset: "st",
      messageCount: 0,
      byRole: { user: 0, assistant: 0, system: 0, tool: 0 },
      compactedCount: 0,
      compaction: { compactions: 0, activeSummary: null },
      tokens: { input: 0, output: 0, total: 0 },
      firstMessageAt: null,
      lastMessageAt: null,
      sessionDurationMs: 0,
    });
  });

  it("counts by role, sums tokens and measures the session", async () => {
    const svcTime = await createTestService({ manualTime: true });
    try {
      const clock = svcTime.clock!;
      const t = await newTenant(svcTime);
      const thr = await svcTime.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "st" } });
      const { threadId } = (await thr.json()) as { threadId: string };
      const send = async (json: unknown) => {
        const res = await svcTime.request(`${W}/${threadId}/messages`, { method: "POST", token: t.key, json });
        expect(res.status).toBe(201);
        return (await res.json()) as Added;
      };
      const first = await send({ role: "system", content: "s" });
      clock.advance(1_500);
      await send({ role: "user", content: "u1", tokens: { input: 10 } });
      clock.advance(2_000);
      await send({ role: "assistant", content: "a1", tokens: { input: 10, output: 25, total: 35 } });
      clock.advance(500);
      await send({ role: "user", content: "u2", tokens: { input: 4, total: 4 } });
      clock.advance(61_000);
      const last = await send({ role: "tool", content: "t1", tokens: { output: 1.5 } });

      const res = await svcTime.request(`${W}/${threadId}/stats`, { token: t.key });
      expect(res.status).toBe(200);
      const s = (await res.json()) as Stats;
      expect(s).toEqual({
        threadId,
        dataset: "st",
        messageCount: 5,
        byRole: { user: 2, assistant: 1, system: 1, tool: 1 },
        compactedCount: 0,
        compaction: { compactions: 0, activeSummary: null },
        tokens: { input: 24, output: 26.5, total: 39 },
        firstMessageAt: first.createdAt,
        lastMessageAt: last.createdAt,
        sessionDurationMs: 65_000,
      });
    } finally {
      await svcTime.close();
    }
  });

  it("answers 404 for an unknown thread and another tenant's thread", async () => {
    const owner = await tenantWithThread();
    await addMany(owner.key, owner.threadId, 1);
    const other = await newTenant(svc);
    for (const [token, id] of [
      [owner.key, "thr_unknown"],
      [other.key, owner.threadId],
    ]) {
      const res = await stats(token, id);
      expect(res.status).toBe(404);
      expect(await body<{ error: string }>(res)).toEqual({ error: "Thread not found" });
    }
  });
});

import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { createApiKey } from "../../lib/api-keys";
import { rowsOf } from "../../lib/db/rows";
import { createProject } from "../../lib/projects";
import { useEdgeWorker } from "../helpers/edge-worker";
import { startFakeOpenAI } from "../helpers/fake-openai";

/**
 * Idempotency keys on the edge host: the built Worker under workerd (Miniflare), the Neon driver
 * over SQL-over-HTTP to a local endpoint on a fresh copy of the migrated template. Every statement
 * is a round trip here, so they are counted. The model calls (chat) go to the fake provider, which
 * a test makes fail.
 */

const provider = await startFakeOpenAI();
afterAll(() => provider.close());
const edge = useEdgeWorker("idem", { OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: provider.url });

interface CallInit {
  method?: string;
  token: string;
  key?: string;
  json?: unknown;
  /** A raw body, sent with `contentType` (instead of `json`). */
  body?: string;
  contentType?: string;
}

async function call(path: string, init: CallInit) {
  const headers: Record<string, string> = { authorization: `Bearer ${init.token}` };
  if (init.key !== undefined) headers["idempotency-key"] = init.key;
  if (init.json !== undefined) headers["content-type"] = "application/json";
  if (init.contentType !== undefined) headers["content-type"] = init.contentType;
  const before = edge.sqlRequests.length;
  const res = await edge.mf.dispatchFetch(`http://localhost${path}`, {
    method: init.method ?? "POST",
    headers,
    body: init.json === undefined ? init.body : JSON.stringify(init.json),
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
    body: (text ? JSON.parse(text) : undefined) as any,
    replayed: res.headers.get("idempotent-replayed"),
    roundTrips: edge.sqlRequests.length - before,
    /** The statements of each SQL-over-HTTP request made while serving it. */
    requests: edge.sqlRequests.slice(before),
  };
}

async function tenant(name: string) {
  const project = await createProject(edge.deps, { name });
  const { key: token } = await createApiKey({ deps: edge.deps, projectId: project.id }, { name: `${name}-key` });
  return { projectId: project.id, token };
}

async function countOf(query: ReturnType<typeof sql>) {
  return Number(rowsOf<{ n: number }>(await edge.database.db.execute(query))[0].n);
}
const messageCount = (threadId: string) =>
  countOf(sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${threadId}`);
const keyRows = (projectId: string) =>
  countOf(sql`SELECT count(*)::int AS n FROM idempotency_keys WHERE project_id = ${projectId}`);

async function newThread(token: string, dataset = "edge") {
  const created = await call("/v1/threads", { token, json: { dataset } });
  expect(created.status).toBe(201);
  return created.body.threadId as string;
}

describe("Idempotency-Key on the Worker (Neon over HTTP)", () => {
  it("replays, refuses a different request, gives one write for concurrent duplicates, and counts round trips", async () => {
    const project = await createProject(edge.deps, { name: "edge-idem" });
    const { key: token } = await createApiKey({ deps: edge.deps, projectId: project.id }, { name: "edge-idem-key" });
    const threadCount = async () =>
      Number(
        rowsOf<{ n: number }>(
          await edge.database.db.execute(sql`SELECT count(*)::int AS n FROM threads WHERE project_id = ${project.id}`),
        )[0].n,
      );

    const first = await call("/v1/threads", { token, key: "edge-1", json: { dataset: "edge" } });
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();
    expect(first.roundTrips).toBe(4); // authentication, claim, the insert, the stored answer

    const again = await call("/v1/threads", { token, key: "edge-1", json: { dataset: "edge" } });
    expect([again.status, again.replayed, again.text]).toEqual([201, "true", first.text]);
    expect(again.roundTrips).toBe(2); // authentication, claim
    expect(await threadCount()).toBe(1);

    const other = await call("/v1/threads", { token, key: "edge-1", json: { dataset: "elsewhere" } });
    expect(other.status).toBe(422);
    expect(other.body).toEqual({ error: expect.stringMatching(/different request/) });

    const bad = await call("/v1/threads", { token, key: "x".repeat(256), json: { dataset: "edge" } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: "Validation error", issues: [{ path: ["Idempotency-Key"] }] });

    const threadId: string = first.body.threadId;
    const burst = await Promise.all(
      Array.from({ length: 8 }, () =>
        call(`/v1/memory/working/threads/${threadId}/messages`, {
          token,
          key: "edge-burst",
          json: { role: "user", content: "once" },
        }),
      ),
    );
    const ran = burst.filter((r) => r.status === 201 && r.replayed === null);
    expect(ran).toHaveLength(1);
    for (const r of burst) expect([409, 201]).toContain(r.status);
    const [{ n }] = rowsOf<{ n: number }>(
      await edge.database.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${threadId}`),
    );
    expect(Number(n)).toBe(1);
  });

  it("a request refused for its input (400, malformed JSON, 415) spends no key: the corrected request runs under it", async () => {
    const { projectId, token } = await tenant("edge-idem-refused");
    const threadId = await newThread(token);
    const path = `/v1/memory/working/threads/${threadId}/messages`;

    const bad = await call(path, { token, key: "v", json: { role: "bot", content: "" } });
    expect([bad.status, bad.body.error, bad.replayed]).toEqual([400, "Validation error", null]);
    expect(await keyRows(projectId)).toBe(0);
    const good = await call(path, { token, key: "v", json: { role: "user", content: "fixed" } });
    expect([good.status, good.replayed]).toEqual([201, null]);

    // The same bytes, first as text/plain, then as JSON: a stored 415 would be replayed.
    const body = JSON.stringify({ role: "user", content: "typed" });
    const typeless = await call(path, { token, key: "c", body, contentType: "text/plain" });
    expect([typeless.status, typeless.replayed]).toEqual([415, null]);
    const typed = await call(path, { token, key: "c", body, contentType: "application/json" });
    expect([typed.status, typed.replayed]).toEqual([201, null]);

    const malformed = await call(path, { token, key: "j", body: "{", contentType: "application/json" });
    expect([malformed.status, malformed.body.error, malformed.replayed]).toEqual([
      400,
      "Malformed JSON in request body",
      null,
    ]);
    // Each refusal: authentication, the claim, then its release (a round trip of its own here).
    for (const refused of [bad, typeless, malformed]) {
      expect(refused.requests).toHaveLength(3);
      expect(refused.requests[2]).toEqual([expect.stringMatching(/^\s*DELETE FROM "idempotency_keys"/)]);
    }
    const corrected = await call(path, { token, key: "j", json: { role: "user", content: "well formed" } });
    expect([corrected.status, corrected.replayed]).toEqual([201, null]);
    expect(await messageCount(threadId)).toBe(3);

    // The answers that ran are kept: a repeat is their replay.
    const typedAgain = await call(path, { token, key: "c", body, contentType: "application/json" });
    expect([typedAgain.status, typedAgain.replayed, typedAgain.text]).toEqual([201, "true", typed.text]);
    expect(await messageCount(threadId)).toBe(3);
    expect(await keyRows(projectId)).toBe(3);
  });

  it("a chat that failed after storing its user message keeps its 500: a retry is replayed, not run again", async () => {
    const { token } = await tenant("edge-idem-chat");
    const threadId = await newThread(token);
    const path = `/v1/memory/working/threads/${threadId}/chat`;
    const chat = { token, key: "chat-1", json: { content: "hello once", recall: false } };
    provider.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    let failed: Awaited<ReturnType<typeof call>>;
    try {
      failed = await call(path, chat);
      expect(failed).toMatchObject({ status: 500, body: { error: "Failed to generate reply" } });
    } finally {
      provider.clearFailures();
    }
    expect(await messageCount(threadId)).toBe(1);
    // The client never saw that 500 and retries under the same key: the provider is up again, but
    // the stored 500 is replayed and the user message is not stored twice.
    const retried = await call(path, chat);
    expect([retried.status, retried.replayed, retried.text]).toEqual([500, "true", failed.text]);
    expect(retried.roundTrips).toBe(2); // authentication, the claim (which finds the answer)
    expect(await messageCount(threadId)).toBe(1);
    // A new key is a new turn.
    const again = await call(path, { ...chat, key: "chat-2" });
    expect([again.status, again.replayed]).toEqual([200, null]);
    expect(await messageCount(threadId)).toBe(3);
  });

  it("erasing a dataset deletes its stored answers in one SQL-over-HTTP request: the keyed write runs anew", async () => {
    const { projectId, token } = await tenant("edge-idem-erase");
    const created = await call("/v1/threads", { token, key: "create", json: { dataset: "erased", tags: ["zorbtag"] } });
    expect(created.status).toBe(201);
    const said = await call(`/v1/memory/working/threads/${created.body.threadId}/messages`, {
      token,
      key: "say",
      json: { role: "user", content: "I work at Acme Corp" },
    });
    expect(said.status).toBe(201);
    // Another dataset's answer stays.
    expect((await call("/v1/threads", { token, key: "kept", json: { dataset: "kept" } })).status).toBe(201);
    expect(await keyRows(projectId)).toBe(3);

    const erased = await call("/v1/memory/recall/datasets/erased", { method: "DELETE", token });
    expect([erased.status, erased.body]).toEqual([
      200,
      { dataset: "erased", deleted: { threads: 1, episodes: 0, facts: 0, entities: 0 } },
    ]);
    // Authentication, then the erase: its two statements (the locks, the deletes) in one batch.
    expect(erased.requests.map((statements) => statements.length)).toEqual([1, 2]);
    expect(erased.requests[1][1]).toMatch(/DELETE FROM "idempotency_keys"/);
    expect(await keyRows(projectId)).toBe(1);

    const again = await call("/v1/threads", { token, key: "create", json: { dataset: "erased", tags: ["zorbtag"] } });
    expect([again.status, again.replayed]).toEqual([201, null]);
    expect(again.body.threadId).not.toBe(created.body.threadId);
    const kept = await call("/v1/threads", { token, key: "kept", json: { dataset: "kept" } });
    expect(kept.replayed).toBe("true");
  });
});

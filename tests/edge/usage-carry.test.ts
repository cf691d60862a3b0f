import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { USAGE_CARRY_MS } from "../../lib/usage/backlog";
import { useEdgeWorker } from "../helpers/edge-worker";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { newTenant } from "../helpers/service";

/**
 * Issue 36's budget on the edge host: the usage ledger costs no statement of its own on a /v1
 * request. A call made after the request's last statement (a chat call that failed, recall's
 * synthesis) waits in the isolate for the next request's API key check, which writes it in the
 * same statement; an isolate left idle writes it once, after the response, by waitUntil.
 */

const provider = await startFakeOpenAI();
const edge = useEdgeWorker("usage-carry", { OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: provider.url });
afterAll(() => provider.close());

async function call(token: string, path: string, json?: unknown) {
  const before = edge.sqlRequests.length;
  const res = await edge.mf.dispatchFetch(`http://localhost${path}`, {
    method: json === undefined ? "GET" : "POST",
    headers: {
      authorization: `Bearer ${token}`,
      ...(json === undefined ? {} : { "content-type": "application/json" }),
    },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await res.text();
  const statements = edge.sqlRequests.slice(before).flat();
  return {
    status: res.status,
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
    body: (text ? JSON.parse(text) : undefined) as any,
    roundTrips: edge.sqlRequests.length - before,
    ledgerWrites: statements.filter((s) => s.includes('INSERT INTO "usage_events"')),
  };
}

async function ledger(projectId: string) {
  return rowsOf<{ operation: string; outcome: string; dataset: string }>(
    await edge.database.db.execute(sql`
      SELECT operation, outcome, dataset FROM usage_events WHERE project_id = ${projectId} ORDER BY id`),
  );
}

const tenant = (name: string) => newTenant(edge, name);

describe("provider calls made after a /v1 request's last statement", () => {
  it("are written by the next request's key check: no statement of their own", async () => {
    const t = await tenant("carry-next");
    const thread = await call(t.key, "/v1/threads", { dataset: "d" });
    expect(thread.status).toBe(201);
    // Every attempt (the client retries twice).
    provider.fail({ status: 500, times: 3, endpoint: "chat" });
    const chat = await call(t.key, `/v1/memory/working/threads/${thread.body.threadId}/chat`, {
      content: "hello",
      recall: false,
    });
    expect(chat.status).toBe(500);
    // The key, the user's message, the window: nothing for the failed call.
    expect(chat.roundTrips).toBe(3);
    expect(chat.ledgerWrites).toEqual([]);
    expect(await ledger(t.projectId)).toEqual([]);

    // Another tenant's read: still one round trip, whose key check writes the row.
    const other = await tenant("carry-other");
    const read = await call(other.key, "/v1/memory/semantic/datasets/d/facts");
    expect(read.status).toBe(200);
    expect(read.roundTrips).toBe(1);
    expect(read.ledgerWrites).toHaveLength(1);
    expect(read.ledgerWrites[0]).toMatch(/^WITH usage_carried AS \(INSERT INTO "usage_events"[\s\S]*UPDATE "api_keys"/);
    // Three attempts reached the provider: three calls.
    expect(await ledger(t.projectId)).toEqual(Array(3).fill({ operation: "chat", outcome: "error", dataset: "d" }));
    expect(await ledger(other.projectId)).toEqual([]);
  });

  it("are written once by the idle isolate after the response (waitUntil), when no request came", async () => {
    const t = await tenant("carry-idle");
    await edge.database.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, created_at)
      VALUES ('fct_idle_' || ${t.projectId}, ${t.projectId}, 'd', 'user', 'lives_in', 'Lisbon', 0.9,
        'I live in Lisbon', now(), now())`);
    const recall = await call(t.key, "/v1/memory/recall", {
      dataset: "d",
      query: "Where does the user live?",
      include: ["synthesis"],
    });
    expect(recall.status).toBe(200);
    expect(recall.body.synthesis).toEqual(expect.any(String));
    // The key (before the provider is paid), then recall, which records its query embedding.
    expect(recall.roundTrips).toBe(2);
    expect(recall.ledgerWrites).toHaveLength(1);
    expect(recall.ledgerWrites[0]).toMatch(/usage_recorded AS/);
    expect((await ledger(t.projectId)).map((r) => r.operation)).toEqual(["recall_embedding"]);

    const before = edge.sqlRequests.length;
    await new Promise((resolve) => setTimeout(resolve, USAGE_CARRY_MS + 1500));
    const later = edge.sqlRequests.slice(before);
    expect(later).toHaveLength(1);
    expect(later[0]).toEqual([expect.stringMatching(/^INSERT INTO "usage_events"/)]);
    expect((await ledger(t.projectId)).map((r) => r.operation)).toEqual(["recall_embedding", "recall_synthesis"]);
  });
});

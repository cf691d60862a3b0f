import { sql } from "drizzle-orm";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { revokeApiKey } from "../../lib/api-keys";
import { rowsOf } from "../../lib/db/rows";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { useEdgeWorker } from "../helpers/edge-worker";
import { fakeEmbedding, startFakeOpenAI } from "../helpers/fake-openai";
import { newTenant } from "../helpers/service";

/**
 * A recall whose query must be embedded, on the edge host (the built Worker under workerd, the
 * Neon driver, the SQL-over-HTTP stand-in counting round trips): with a key the isolate has not
 * seen accepted, the key is checked on its own before the provider is paid (two round trips);
 * with a key it accepted lately (lib/accepted-keys.ts), the embedding goes first and the check
 * rides with the recall statement (one). A revocation is still seen by the very next request.
 * Every query is new to the isolate (its query embeddings are cached per isolate).
 */

const provider = await startFakeOpenAI();
const edge = useEdgeWorker("accepted-keys", { OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: provider.url });
afterAll(() => provider.close());
beforeEach(() => provider.reset());

let queries = 0;

async function recall(token: string, question: string) {
  const query = `${question} (${++queries})`;
  const before = edge.sqlRequests.length;
  const embeddingsBefore = provider.embeddingCalls().length;
  const res = await edge.mf.dispatchFetch("http://localhost/v1/memory/recall", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ dataset: "d", query }),
  });
  const text = await res.text();
  return {
    status: res.status,
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
    body: JSON.parse(text) as any,
    roundTrips: edge.sqlRequests.slice(before).map((statements) => statements.length),
    embeddingCalls: provider.embeddingCalls().length - embeddingsBefore,
  };
}

async function tenant(name: string) {
  const t = await newTenant(edge, name);
  await edge.database.db.execute(sql`
    INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, created_at, embedding)
    VALUES ('fct_ak_' || ${t.projectId}, ${t.projectId}, 'd', 'user', 'lives_in', 'Lisbon', 0.9,
      'I live in Lisbon', now(), now(), ${`[${fakeEmbedding("user lives in Lisbon", TEST_EMBEDDING_DIMENSIONS)}]`}::vector)`);
  return t;
}

async function ledger(projectId: string) {
  return rowsOf<{ operation: string }>(
    await edge.database.db.execute(sql`SELECT operation FROM usage_events WHERE project_id = ${projectId} ORDER BY id`),
  ).map((r) => r.operation);
}

describe("recall with a query to embed, over the Neon driver", () => {
  it("checks a key it has not seen accepted first, then takes one round trip once it has", async () => {
    const t = await tenant("ak-first");
    const first = await recall(t.key, "Where does the user live?");
    expect(first.status).toBe(200);
    expect(first.body.context).toContain("Lisbon");
    // The key alone, then the statement: the provider was paid only after the key's answer.
    expect(first.roundTrips).toEqual([1, 1]);
    expect(first.embeddingCalls).toBe(1);

    const second = await recall(t.key, "Where does the user live now?");
    expect(second.status).toBe(200);
    expect(second.body.context).toContain("Lisbon");
    // The key's check and the recall statement in one HTTP transaction.
    expect(second.roundTrips).toEqual([2]);
    expect(second.embeddingCalls).toBe(1);
    expect(await ledger(t.projectId)).toEqual(["recall_embedding", "recall_embedding"]);
  });

  it("answers a key revoked since with its 401 at once: the call already paid is in its project's ledger, and the key is forgotten", async () => {
    const t = await tenant("ak-revoked");
    expect((await recall(t.key, "Where does the user live?")).status).toBe(200);
    await revokeApiKey(edge.deps, { apiKeyId: t.keyId });

    const refused = await recall(t.key, "Where does the user live now?");
    expect({ status: refused.status, body: refused.body }).toEqual({
      status: 401,
      body: { error: "API key has been revoked" },
    });
    expect(refused.roundTrips).toEqual([2]);
    expect(refused.embeddingCalls).toBe(1);
    expect(await ledger(t.projectId)).toEqual(["recall_embedding", "recall_embedding"]);

    // Forgotten: checked first again, and nothing more is asked of the provider.
    const again = await recall(t.key, "Where does the user live today?");
    expect(again.status).toBe(401);
    expect(again.roundTrips).toEqual([1]);
    expect(again.embeddingCalls).toBe(0);
    expect(await ledger(t.projectId)).toHaveLength(2);
  });

  it("never pays the provider for a key it does not know", async () => {
    const refused = await recall(`mk_${"0".repeat(64)}`, "Where does the user live?");
    expect({ status: refused.status, body: refused.body }).toEqual({ status: 401, body: { error: "Invalid API key" } });
    expect(refused.roundTrips).toEqual([1]);
    expect(refused.embeddingCalls).toBe(0);
  });

  it("counts a write's accepted key too: the recall after it takes one round trip", async () => {
    const t = await tenant("ak-write");
    const res = await edge.mf.dispatchFetch("http://localhost/v1/threads", {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      body: JSON.stringify({ dataset: "d" }),
    });
    expect(res.status).toBe(201);
    await res.text();
    const read = await recall(t.key, "Where does the user live?");
    expect(read.status).toBe(200);
    expect(read.roundTrips).toEqual([2]);
    expect(read.embeddingCalls).toBe(1);
  });
});

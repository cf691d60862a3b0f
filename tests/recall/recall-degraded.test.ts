import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, fakeEmbedding, startFakeOpenAI } from "../helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Recall when the query cannot be embedded (spec rule 6: keyword plus recency): one statement, as
 * for a recall that has its vector, counted at the driver. With a provider configured the key is
 * checked first, on its own, before the provider is paid (each test's key is new to the process; one
 * it accepted lately is not waited for: tests/edge/accepted-keys.test.ts); with none, nothing is
 * asked of one and the key's check leads the statement (over Neon one round trip:
 * tests/edge/round-trips.test.ts).
 */
const RECALL = "/v1/memory/recall";
const DIMS = TEST_EMBEDDING_DIMENSIONS;

let svc: TestService;
let noProvider: TestService;
let fake: FakeOpenAI;
const statements: string[] = [];
const record = (statement: string) => void statements.push(statement);

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake, onQuery: record });
  noProvider = await createTestService({ onQuery: record });
});
afterAll(async () => {
  await svc?.close();
  await noProvider?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

async function tenantWithFacts(on = svc) {
  const t = await newTenant(on, `degraded-${randomUUID().slice(0, 6)}`);
  for (const [object, validAt] of [
    ["sailing", "2025-01-01T00:00:00.000Z"],
    ["poetry", "2026-01-01T00:00:00.000Z"],
  ]) {
    await on.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
      VALUES (${`fct_${randomUUID()}`}, ${t.projectId}, 'ds', 'user', 'likes', ${object}, 0.9, ${`I said ${object}`},
              ${validAt}::timestamptz, ${`[${fakeEmbedding(`user likes ${object}`, DIMS)}]`}::vector)`);
  }
  return t;
}

async function recalled(key: string, body: Record<string, unknown>, on = svc) {
  statements.length = 0;
  const res = await on.request(RECALL, { method: "POST", token: key, json: body });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return {
    body: JSON.parse(text) as { facts: { object: string }[] | null },
    statements: [...statements],
    timing: res.headers.get("server-timing"),
  };
}

describe("recall when the query's embedding fails", () => {
  it("answers the keyword ranking from one statement after the key's check", async () => {
    const t = await tenantWithFacts();
    fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
    const degraded = await recalled(t.key, { dataset: "ds", query: "sailing trips", include: ["raw"] });
    expect(fake.embeddingCalls()).toHaveLength(1);
    // The keyword match first, then the newest facts.
    expect(degraded.body.facts?.map((f) => f.object)).toEqual(["sailing", "poetry"]);
    expect(degraded.statements, degraded.statements.join("\n---\n")).toHaveLength(2);
    // The key's stamp alone first (before the provider was asked), then the keyword statement.
    expect(degraded.statements[0]).toMatch(/^UPDATE "api_keys"/);
    expect(degraded.statements[1]).toMatch(/by_keyword/);
    expect(degraded.statements[1]).not.toMatch(/by_vector/);
  });

  it("with episodes and messages too", async () => {
    const t = await tenantWithFacts();
    fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
    const degraded = await recalled(t.key, {
      dataset: "ds",
      query: "sailing trips",
      include: ["raw", "episodes", "messages"],
    });
    expect(degraded.body.facts?.map((f) => f.object)).toEqual(["sailing", "poetry"]);
    expect(degraded.statements, degraded.statements.join("\n---\n")).toHaveLength(2);
  });
});

describe("recall with a query and no provider configured", () => {
  it("ranks by keyword in one statement led by the key's check, asking no provider", async () => {
    const t = await tenantWithFacts(noProvider);
    const degraded = await recalled(t.key, { dataset: "ds", query: "sailing trips", include: ["raw"] }, noProvider);
    expect(degraded.body.facts?.map((f) => f.object)).toEqual(["sailing", "poetry"]);
    expect(degraded.statements, degraded.statements.join("\n---\n")).toHaveLength(2);
    // The key's stamp and the keyword statement (on the embedded database the stamp is sent just
    // before the statement, when the statement comes; over Neon in the same request).
    expect(degraded.statements.filter((x) => /^UPDATE "api_keys"/.test(x))).toHaveLength(1);
    expect(degraded.statements.filter((x) => /by_keyword/.test(x) && !/by_vector/.test(x))).toHaveLength(1);
    expect(degraded.timing).toMatch(/embedding;dur=0(\.0)?;desc="not configured"/);
  });

  it("still answers a refused key with the spec's 401, nothing read", async () => {
    const t = await tenantWithFacts(noProvider);
    const res = await noProvider.request(RECALL, {
      method: "POST",
      token: `${t.key.slice(0, -4)}0000`,
      json: { dataset: "ds", query: "sailing trips" },
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: "Invalid API key" });
  });
});

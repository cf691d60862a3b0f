import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { revokeApiKey } from "../../lib/api-keys";
import { rowsOf } from "../../lib/db/rows";
import { useEdgeWorker } from "../helpers/edge-worker";
import { newTenant } from "../helpers/service";

/**
 * Issue 20's budget on the edge host, counted where it costs: the built Worker under workerd, the
 * Neon serverless driver, and a local SQL-over-HTTP endpoint that records each HTTP request (one
 * network round trip on Neon). Every /v1 read is one round trip, its API key checked inside it;
 * a write is at most two (the key, then the write).
 */

const edge = useEdgeWorker("round-trips");

interface CallInit {
  method?: string;
  json?: unknown;
  headers?: Record<string, string>;
}

async function call(token: string, path: string, init: CallInit = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...init.headers };
  if (init.json !== undefined) headers["content-type"] = "application/json";
  const before = edge.sqlRequests.length;
  const res = await edge.mf.dispatchFetch(`http://localhost${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers,
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  return {
    status: res.status,
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
    body: (text ? JSON.parse(text) : undefined) as any,
    roundTrips: edge.sqlRequests.length - before,
    statements: edge.sqlRequests.slice(before).flat(),
  };
}

const tenant = (name: string) => newTenant(edge, name);

/** A thread with two messages, an extracted-looking fact and its entity, written as the service would. */
async function seeded(name: string) {
  const t = await tenant(name);
  const thread = await call(t.key, "/v1/threads", { json: { dataset: "rt" } });
  expect(thread.status).toBe(201);
  const threadId: string = thread.body.threadId;
  for (const content of ["I moved to Lisbon last spring", "Noted!"]) {
    const add = await call(t.key, `/v1/memory/working/threads/${threadId}/messages`, {
      json: { role: content === "Noted!" ? "assistant" : "user", content },
    });
    expect(add.status).toBe(201);
  }
  await edge.database.db.execute(sql`
    WITH f AS (
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, created_at)
      VALUES ('fct_rt_' || ${t.projectId}, ${t.projectId}, 'rt', 'user', 'lives_in', 'Lisbon', 0.9,
        'I moved to Lisbon last spring', now(), now())
      RETURNING id),
    e AS (
      INSERT INTO entities (id, project_id, dataset, name, type, created_at)
      VALUES ('ent_rt_' || ${t.projectId}, ${t.projectId}, 'rt', 'Lisbon', 'place', now()) RETURNING id)
    INSERT INTO fact_entities (fact_id, entity_id) SELECT f.id, e.id FROM f, e`);
  return { ...t, threadId };
}

describe("round trips per /v1 request over the Neon driver", () => {
  let t: Awaited<ReturnType<typeof seeded>>;
  beforeAll(async () => {
    t = await seeded("rt-reads");
  });

  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  const reads: [name: string, request: () => [string, CallInit?], check: (body: any) => void][] = [
    ["get thread", () => [`/v1/threads/${t.threadId}`], (b) => expect(b.messageCount).toBe(2)],
    [
      "list messages",
      () => [`/v1/memory/working/threads/${t.threadId}/messages?limit=10`],
      (b) =>
        expect(b.messages.map((m: { content: string }) => m.content)).toEqual([
          "I moved to Lisbon last spring",
          "Noted!",
        ]),
    ],
    [
      "prepare",
      () => [`/v1/memory/working/threads/${t.threadId}/prepare`, { json: { messageLimit: 5 } }],
      (b) => expect(b.messageCount).toBe(2),
    ],
    [
      "stats",
      () => [`/v1/memory/working/threads/${t.threadId}/stats`],
      (b) => expect(b.byRole).toMatchObject({ user: 1 }),
    ],
    ["list episodes", () => ["/v1/memory/episodic/datasets/rt/episodes"], (b) => expect(b.episodes).toEqual([])],
    [
      "list facts",
      () => ["/v1/memory/semantic/datasets/rt/facts"],
      (b) => expect(b.facts.map((f: { object: string }) => f.object)).toEqual(["Lisbon"]),
    ],
    [
      "list entities",
      () => ["/v1/memory/semantic/datasets/rt/entities"],
      (b) => expect(b.entities.map((e: { name: string }) => e.name)).toEqual(["Lisbon"]),
    ],
    [
      "an entity's facts",
      () => ["/v1/memory/semantic/datasets/rt/entities/Lisbon/facts"],
      (b) => expect(b.facts).toHaveLength(1),
    ],
    [
      "recall without a query",
      () => ["/v1/memory/recall", { json: { dataset: "rt" } }],
      (b) => expect(b.context).toContain("Lisbon"),
    ],
    [
      "recall with messages",
      () => ["/v1/memory/recall", { json: { dataset: "rt", include: ["messages"], limit: 1 } }],
      // The user's message is the fact's quote: the fact carries it, so it is skipped.
      (b) => {
        expect(b.factCount).toBe(1);
        expect(b.messages).toEqual([]);
      },
    ],
    [
      "export",
      () => ["/v1/memory/recall/datasets/rt/export"],
      (b) => {
        expect(b.threads[0].messages).toHaveLength(2);
        expect(b.facts).toHaveLength(1);
        expect(b.entities).toEqual([{ name: "Lisbon", type: "place" }]);
      },
    ],
  ];

  it.each(reads)("%s: one round trip, the key checked inside it", async (_name, request, check) => {
    const [path, init] = request();
    const res = await call(t.key, path, init);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    check(res.body);
    expect(res.roundTrips, res.statements.join("\n---\n")).toBe(1);
    // Last in the transaction: the key's row is locked only while it commits.
    expect(res.statements.at(-1)).toMatch(/UPDATE "api_keys"/);
  });

  it("a read of something missing is still one round trip (its 404)", async () => {
    for (const path of [
      "/v1/threads/thr_missing",
      "/v1/memory/working/threads/thr_missing/messages",
      "/v1/memory/episodic/episodes/epi_missing",
    ]) {
      const res = await call(t.key, path);
      expect(res.status, path).toBe(404);
      expect(res.roundTrips, path).toBe(1);
    }
  });

  it("writes take at most two: the key, then the one statement", async () => {
    const created = await call(t.key, "/v1/threads", { json: { dataset: "rt" } });
    expect(created.status).toBe(201);
    expect(created.roundTrips).toBe(2);
    const added = await call(t.key, `/v1/memory/working/threads/${created.body.threadId}/messages`, {
      json: { role: "user", content: "hello" },
    });
    expect(added.status).toBe(201);
    expect(added.roundTrips).toBe(2);
  });

  it("recall with a query and no provider to embed it: the keyword ranking in one round trip, the key checked inside it", async () => {
    // No provider here: recall ranks by keyword (spec rule 6) without asking one, so the key's
    // check rides with the statement (with a provider it goes first, before the provider is paid).
    const res = await call(t.key, "/v1/memory/recall", { json: { dataset: "rt", query: "where does the user live" } });
    expect(res.status).toBe(200);
    expect(res.body.context).toContain("Lisbon");
    expect(res.roundTrips).toBe(1);
    expect(res.statements[0]).toMatch(/by_keyword/);
    expect(res.statements[1]).toMatch(/UPDATE "api_keys"/);
  });

  it("a read stamps the key's lastUsedAt", async () => {
    const k = await tenant("rt-stamp");
    await call(k.key, "/v1/memory/semantic/datasets/rt/facts");
    const [row] = rowsOf<{ last_used_at: unknown }>(
      await edge.database.db.execute(sql`SELECT last_used_at FROM api_keys WHERE id = ${k.keyId}`),
    );
    expect(row.last_used_at).not.toBeNull();
  });
});

describe("a refused key on a read: the spec's exact 401, nothing read, in the same round trip", () => {
  it("unknown, revoked and orphaned keys, on every kind of read, ahead of the read's own 404 or 400", async () => {
    const owner = await seeded("rt-refused");
    const revoked = await tenant("rt-revoked");
    await revokeApiKey(edge.deps, { apiKeyId: revoked.keyId });
    const orphan = await tenant("rt-orphan");
    await edge.database.db.execute(sql`UPDATE api_keys SET project_id = NULL WHERE id = ${orphan.keyId}`);
    const keys: [string, string][] = [
      [`mk_${"0".repeat(64)}`, "Invalid API key"],
      [revoked.key, "API key has been revoked"],
      [orphan.key, "API key is not linked to a project"],
    ];
    const paths: [string, CallInit?][] = [
      [`/v1/threads/${owner.threadId}`],
      ["/v1/threads/thr_missing"],
      [`/v1/memory/working/threads/${owner.threadId}/messages?limit=0`], // a 400 for a valid key
      [`/v1/memory/working/threads/${owner.threadId}/prepare`, { json: {} }],
      ["/v1/memory/semantic/datasets/rt/facts"],
      ["/v1/memory/recall", { json: { dataset: "rt" } }],
      ["/v1/memory/recall", { json: { dataset: "rt", query: "Lisbon" } }],
      ["/v1/memory/recall/datasets/rt/export"],
    ];
    for (const [token, message] of keys) {
      for (const [path, init] of paths) {
        const res = await call(token, path, init);
        expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 401, body: { error: message } });
        expect(res.roundTrips, `${message} ${path}`).toBeLessThanOrEqual(1);
      }
    }
  });

  it("a revocation is seen by the very next read", async () => {
    const k = await seeded("rt-revoke-next");
    expect((await call(k.key, "/v1/memory/semantic/datasets/rt/facts")).status).toBe(200);
    await revokeApiKey(edge.deps, { apiKeyId: k.keyId });
    const after = await call(k.key, "/v1/memory/semantic/datasets/rt/facts");
    expect(after).toMatchObject({ status: 401, body: { error: "API key has been revoked" }, roundTrips: 1 });
  });

  it("another project's key reads nothing of this one", async () => {
    const owner = await seeded("rt-owner");
    const other = await tenant("rt-other");
    const thread = await call(other.key, `/v1/threads/${owner.threadId}`);
    expect(thread).toMatchObject({ status: 404, roundTrips: 1 });
    const facts = await call(other.key, "/v1/memory/semantic/datasets/rt/facts");
    expect(facts.status).toBe(200);
    expect(facts.body.facts).toEqual([]);
  });
});

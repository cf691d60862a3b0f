import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { manualClock } from "../../lib/clock";
import { rowsOf } from "../../lib/db/rows";
import { newId } from "../../lib/ids";
import { deleteProject } from "../../lib/projects";
import { KEYWORD_COMMON_MIN_DOCS, KEYWORD_FULL_MATCH_WORDS } from "../../lib/recall/keyword";
import { DEFAULT_SETTINGS } from "../../lib/settings/settings";
import { patchProjectSettings } from "../../lib/settings/store";
import type { ApiSchema } from "../helpers/api-types";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, fakeEmbedding, near, startFakeOpenAI } from "../helpers/fake-openai";
import { type FakeRerank, startFakeRerank } from "../helpers/fake-rerank";
import { keywordSignals } from "../helpers/keyword-oracle";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * POST /v1/memory/recall against the real database: validation, the three signals and their
 * fusion, grouping, limits, the no-query and asOf paths, includes, degradation and round trips.
 * Facts and entities are written straight into the tables (extraction is tested elsewhere) with
 * embeddings chosen per test; the query is embedded by the fake provider (fakeEmbedding).
 */
const RECALL = "/v1/memory/recall";
const DIMS = TEST_EMBEDDING_DIMENSIONS;
/**
 * A fact's score with the default weights (lib/settings/settings.ts): cosine + 0.2 × keyword (BM25 over
 * the best candidate's) + 0.1 × entity + 0.1 × time.
 */
const score = ({ cosine = 0, keyword = 0, entity = 0, time = 0 }) =>
  cosine * DEFAULT_SETTINGS.semantic.vectorWeight +
  keyword * DEFAULT_SETTINGS.semantic.keywordWeight +
  entity * DEFAULT_SETTINGS.semantic.entityWeight +
  time * DEFAULT_SETTINGS.semantic.timeWeight;
/** Scores that hold a cosine: the vectors are stored (and the query searched) at half precision. */
const COSINE_DIGITS = 3;
const cosineOf = (a: number[], b: number[]) => {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (const [i, x] of a.entries()) {
    dot += x * (b[i] ?? 0);
    na += x * x;
    nb += (b[i] ?? 0) ** 2;
  }
  return dot / Math.sqrt(na * nb);
};

let svc: TestService;
let fake: FakeOpenAI;
let reranker: FakeRerank;
let clock: ReturnType<typeof manualClock>;
let failStatementsMatching: RegExp | undefined;
const statements: string[] = [];

beforeAll(async () => {
  fake = await startFakeOpenAI();
  reranker = await startFakeRerank();
  svc = await createTestService({
    provider: fake,
    env: { RERANK_BASE_URL: reranker.url },
    manualTime: true,
    onQuery: (statement) => {
      statements.push(statement);
      // A database failure at the driver boundary, for the degradation tests.
      if (failStatementsMatching?.test(statement)) throw new Error("injected database failure");
    },
  });
  clock = svc.clock as ReturnType<typeof manualClock>;
  clock.set(new Date("2026-06-01T12:00:00.000Z"));
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
  await reranker?.close();
});
beforeEach(() => {
  fake.reset();
  reranker.reset();
  failStatementsMatching = undefined;
});

type Recall = ApiSchema<"RecallResponse">;

interface FactInput {
  predicate: string;
  object: string;
  confidence?: number;
  validAt?: string;
  validUntil?: string | null;
  invalidAt?: string | null;
  /** The fact's embedding: a vector, the embedding of a text, or none (outside vector search). */
  embedding?: number[] | string | null;
  entities?: string[];
  /** The user's words; "I said <object>" when absent. */
  sourceQuote?: string;
}

async function tenant() {
  const t = await newTenant(svc, `recall-${randomUUID().slice(0, 6)}`);
  let n = 0;
  const entityIds = new Map<string, string>();
  const api = {
    ...t,
    async recall(body: Record<string, unknown>, status = 200) {
      const res = await svc.request(RECALL, { method: "POST", token: t.key, json: body });
      const text = await res.text();
      expect(res.status, text).toBe(status);
      return JSON.parse(text) as Recall;
    },
    /** The keyword signal of each fact of `r` (tests/helpers/keyword-oracle.ts), in its order. */
    async keywords(dataset: string, query: string, r: Recall) {
      const ids = (r.facts ?? []).map((f) => f.factId);
      const signals = await keywordSignals(svc.deps, { projectId: t.projectId, dataset }, query, ids);
      return ids.map((id) => signals.get(id) ?? 0);
    },
    /** An entity with the embedding of its name (or the one given). */
    async entity(dataset: string, name: string, type = "ORG", embedding: number[] | null = fakeEmbedding(name, DIMS)) {
      const id = newId("ent");
      await svc.deps.db.execute(sql`
        INSERT INTO entities (id, project_id, dataset, name, type, embedding)
        VALUES (${id}, ${t.projectId}, ${dataset}, ${name}, ${type}, ${embedding ? `[${embedding}]` : null}::vector)`);
      entityIds.set(`${dataset}\u0000${name}`, id);
      return id;
    },
    async fact(dataset: string, f: FactInput) {
      n++;
      const id = `fct_${String(n).padStart(3, "0")}_${randomUUID().slice(0, 8)}`;
      const text = `user ${f.predicate} ${f.object}`;
      const embedding =
        f.embedding === null
          ? null
          : typeof f.embedding === "object"
            ? f.embedding
            : fakeEmbedding(f.embedding ?? text, DIMS);
      await svc.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote,
                           valid_at, valid_until, invalid_at, embedding)
        VALUES (${id}, ${t.projectId}, ${dataset}, 'user', ${f.predicate}, ${f.object}, ${f.confidence ?? 0.9},
                ${f.sourceQuote ?? `I said ${f.object}`}, ${f.validAt ?? new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString()}::timestamptz,
                ${f.validUntil ?? null}::timestamptz, ${f.invalidAt ?? null}::timestamptz,
                ${embedding ? `[${embedding}]` : null}::vector)`);
      for (const name of f.entities ?? []) {
        const entityId = entityIds.get(`${dataset}\u0000${name}`) ?? (await api.entity(dataset, name));
        await svc.deps.db.execute(sql`INSERT INTO fact_entities (fact_id, entity_id) VALUES (${id}, ${entityId})`);
      }
      return id;
    },
    async episode(dataset: string, summary: string, endedAt: string, embedding = fakeEmbedding(summary, DIMS)) {
      const id = newId("epi");
      await svc.deps.db.execute(sql`
        INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, summary, key_learnings,
                              message_count, from_seq, to_seq, started_at, ended_at, embedding)
        VALUES (${id}, ${t.projectId}, 'thr_x', ${dataset}, 'completed', 'completed', ${summary},
                ${JSON.stringify([`learned from ${summary}`])}::jsonb, 2, 1, 2, ${endedAt}::timestamptz,
                ${endedAt}::timestamptz, ${`[${embedding}]`}::vector)`);
      return id;
    },
  };
  return api;
}

const objects = (r: Recall) => (r.facts ?? []).map((f) => f.object);

// -------------------------------------------------------------------------------------------------

describe("request validation", () => {
  const cases: [string, Record<string, unknown>, (string | number)[]][] = [
    ["dataset missing", {}, ["dataset"]],
    ["dataset empty", { dataset: "" }, ["dataset"]],
    ["dataset of 257 characters", { dataset: "d".repeat(257) }, ["dataset"]],
    ["query over 2000 characters", { dataset: "ds", query: "q".repeat(2001) }, ["query"]],
    ["query not a string", { dataset: "ds", query: 5 }, ["query"]],
    ["include with an unknown part", { dataset: "ds", include: ["facts"] }, ["include", 0]],
    ["include not an array", { dataset: "ds", include: "raw" }, ["include"]],
    ["limit 0", { dataset: "ds", limit: 0 }, ["limit"]],
    ["limit 101", { dataset: "ds", limit: 101 }, ["limit"]],
    ["limit not an integer", { dataset: "ds", limit: 2.5 }, ["limit"]],
    ["minConfidence below 0", { dataset: "ds", minConfidence: -0.01 }, ["minConfidence"]],
    ["minConfidence above 1", { dataset: "ds", minConfidence: 1.01 }, ["minConfidence"]],
    ["asOf not a date", { dataset: "ds", asOf: "yesterday" }, ["asOf"]],
    ["asOf an impossible date", { dataset: "ds", asOf: "2026-02-30" }, ["asOf"]],
  ];
  it.each(cases)("400 for %s, naming the field", async (_, body, path) => {
    const t = await tenant();
    const res = await svc.request(RECALL, { method: "POST", token: t.key, json: body });
    expect(res.status).toBe(400);
    const error = (await res.json()) as { error: string; issues: { path: (string | number)[] }[] };
    expect(error.error).toBe("Validation error");
    expect(error.issues.map((i) => i.path)).toContainEqual(path);
  });

  it("accepts the bounds: 256-character dataset, 2000-character query, limit 1 and 100, minConfidence 0 and 1", async () => {
    const t = await tenant();
    await t.recall({ dataset: "d".repeat(256), query: "q".repeat(2000) });
    for (const limit of [1, 100]) await t.recall({ dataset: "ds", limit });
    for (const minConfidence of [0, 1]) await t.recall({ dataset: "ds", minConfidence });
    await t.recall({ dataset: "ds", asOf: "2026-01-01" });
    await t.recall({ dataset: "ds", asOf: "2026-01-01T10:00:00+02:00" });
  });

  it("answers an asOf at either end of the years with a query naming a relative time (its range stays within them)", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "lives_in", object: "Lisbon", validAt: "2020-01-01T00:00:00.000Z" });
    for (const [asOf, query] of [
      ["9999-12-31", "lisbon today"],
      ["9999-12-31T12:00:00Z", "lisbon this year"],
      ["9999-12-15", "this month in lisbon"],
      ["0001-06-01", "lisbon 2 years ago"],
      ["0050-06-01", "lisbon yesterday"],
    ]) {
      const body = await t.recall({ dataset: "ds", query, asOf, include: ["messages", "episodes"] });
      expect(body.factCount, `${asOf} ${query}`).toBe(asOf.startsWith("9999") ? 1 : 0);
    }
  });

  it("strips unknown fields and needs a JSON body", async () => {
    const t = await tenant();
    await t.recall({ dataset: "ds", surprise: true });
    const res = await svc.request(RECALL, { method: "POST", token: t.key, body: "dataset=ds" });
    expect(res.status).toBe(415);
  });
});

describe("response shape", () => {
  it("has every field, absent includes null, and an empty context when nothing matched", async () => {
    const t = await tenant();
    const body = await t.recall({ dataset: "nothing-here", query: "anything at all" });
    expect(body).toEqual({
      context: "",
      factCount: 0,
      synthesis: null,
      facts: null,
      groups: null,
      episodes: null,
      messages: null,
    });
  });

  it("renders the spec's block: lead line, FACTS lines with validity, ENTITIES with types", async () => {
    const t = await tenant();
    await t.fact("ds", {
      predicate: "works_at",
      object: "Acme\nCorp",
      validAt: "2025-03-04T05:06:07.000Z",
      entities: ["Acme Corp"],
    });
    await t.fact("ds", {
      predicate: "lived_in",
      object: "Paris",
      validAt: "2020-01-01T00:00:00.000Z",
      validUntil: "2024-12-31T00:00:00.000Z",
      entities: ["Paris"],
    });
    const body = await t.recall({ dataset: "ds" });
    expect(body.context).toBe(
      [
        "Known facts about the user, most relevant first.",
        "",
        "# FACTS (format: fact (valid: from - to))",
        "- user works at Acme Corp (valid: 2025-03-04 - present)",
        "- user lived in Paris (valid: 2020-01-01 - 2024-12-31)",
        "",
        "# ENTITIES",
        "- Acme Corp (ORG)",
        "- Paris (ORG)",
      ].join("\n"),
    );
    expect(body.factCount).toBe(2);
    // Deterministic: the same rows give the same text.
    expect((await t.recall({ dataset: "ds" })).context).toBe(body.context);
  });
});

describe("ranking", () => {
  it("vector alone: facts sharing no word with the query rank by cosine, which is their score", async () => {
    const t = await tenant();
    const q = fakeEmbedding("what does she enjoy drinking", DIMS);
    await t.fact("ds", { predicate: "likes", object: "oolong", embedding: near(q, 0.9, "a") });
    await t.fact("ds", { predicate: "likes", object: "rooibos", embedding: near(q, 0.99, "b") });
    await t.fact("ds", { predicate: "likes", object: "matcha", embedding: near(q, 0.5, "c") });
    const body = await t.recall({ dataset: "ds", query: "what does she enjoy drinking", include: ["raw"] });
    expect(objects(body)).toEqual(["rooibos", "oolong", "matcha"]);
    const scores = body.facts?.map((f) => f.relevanceScore) ?? [];
    for (const [i, cosine] of [0.99, 0.9, 0.5].entries())
      expect(scores[i]).toBeCloseTo(score({ cosine }), COSINE_DIGITS);
  });

  it("keyword alone: a stemmed word match on a fact outside vector search ranks, others do not appear", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "speaks", object: "Portuguese", embedding: null });
    await t.fact("ds", { predicate: "owns", object: "a bicycle", embedding: null });
    const query = "Which languages does the user speak?";
    const body = await t.recall({ dataset: "ds", query, include: ["raw"] });
    expect(objects(body)).toEqual(["Portuguese"]);
    // One word no other fact holds, the fact of average length: half a full match.
    const [keyword] = await t.keywords("ds", query, body);
    expect(keyword).toBeCloseTo(1 / KEYWORD_FULL_MATCH_WORDS, 12);
    expect(body.facts?.[0].relevanceScore).toBeCloseTo(score({ keyword }), 12);
  });

  it("anchor alone: an entity named in the query brings every fact touching it", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "commutes_by", object: "train", embedding: null, entities: ["Globex"] });
    await t.fact("ds", { predicate: "reports_to", object: "Hank", embedding: null, entities: ["Globex"] });
    await t.fact("ds", { predicate: "plays", object: "chess", embedding: null });
    const body = await t.recall({ dataset: "ds", query: "anything new at globex?", include: ["raw"] });
    // The same boost for both: the newer first.
    expect(objects(body)).toEqual(["Hank", "train"]);
    expect(body.facts?.map((f) => f.relevanceScore)).toEqual([score({ entity: 1 }), score({ entity: 1 })]);
    expect(body.groups?.map((g) => g.entityName)).toEqual(["Globex"]);
  });

  it("anchor by similarity: the entities nearest the query, at least anchorVectorMin similar, at most anchorVectorTopK", async () => {
    const t = await tenant();
    const q = fakeEmbedding("tell me about the employer", DIMS);
    await t.entity("ds", "Initech", "ORG", near(q, 0.9, "i"));
    await t.entity("ds", "Umbrella", "ORG", near(q, 0.8, "u"));
    await t.entity("ds", "Hooli", "ORG", near(q, 0.6, "h"));
    for (const name of ["Initech", "Umbrella", "Hooli"]) {
      await t.fact("ds", {
        predicate: "knows",
        object: `someone at ${name.slice(0, 2)}`,
        embedding: null,
        entities: [name],
      });
    }
    const all = await t.recall({ dataset: "ds", query: "tell me about the employer", include: ["raw"] });
    expect(all.groups?.map((g) => g.entityName)).toEqual(["Initech", "Umbrella"]); // Hooli is below 0.75
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { semantic: { anchorVectorTopK: 1 } });
    const top = await t.recall({ dataset: "ds", query: "tell me about the employer", include: ["raw"] });
    expect(top.groups?.map((g) => g.entityName)).toEqual(["Initech"]);
    await patchProjectSettings(
      { deps: svc.deps, projectId: t.projectId },
      { semantic: { anchorVectorTopK: 3, anchorVectorMin: 0.5 } },
    );
    const wide = await t.recall({ dataset: "ds", query: "tell me about the employer", include: ["raw"] });
    expect(wide.groups?.map((g) => g.entityName)).toEqual(["Initech", "Umbrella", "Hooli"]);
  });

  it("literal anchors match whole words of the query, case and punctuation aside", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "uses", object: "a runtime", embedding: null, entities: ["Node.js"] });
    await t.fact("ds", { predicate: "visited", object: "a city", embedding: null, entities: ["New York"] });
    await t.fact("ds", { predicate: "writes", object: "a language", embedding: null, entities: ["Go"] });
    await t.fact("ds", { predicate: "drinks", object: "coffee", embedding: null, entities: ["Café Zoë"] });
    const groups = async (query: string) =>
      (await t.recall({ dataset: "ds", query, include: ["raw"] })).groups?.map((g) => g.entityName) ?? [];
    expect(await groups("is NODE.JS still in use?")).toEqual(["Node.js"]);
    expect(await groups("trip to new-york")).toEqual(["New York"]);
    expect(await groups("going ahead")).toEqual([]); // "Go" is not a word of it
    expect(await groups("back to café zoë")).toEqual(["Café Zoë"]);
  });

  it("fusion: each signal's score times its weight, summed; a keyword or entity hit can lift a less similar fact", async () => {
    const t = await tenant();
    const query = "weekend hiking with Ramona";
    const q = fakeEmbedding(query, DIMS);
    // the most similar, nothing else
    await t.fact("ds", { predicate: "likes", object: "the seaside", embedding: near(q, 0.99, "v") });
    // the only keyword match (hiking), less similar
    await t.fact("ds", { predicate: "enjoys", object: "hiking", embedding: near(q, 0.95, "k") });
    // touches the entity the query names (Ramona), the least similar
    await t.fact("ds", {
      predicate: "is_married_to",
      object: "someone",
      embedding: near(q, 0.9, "a"),
      entities: ["Ramona"],
    });
    const body = await t.recall({ dataset: "ds", query, include: ["raw"] });
    expect(objects(body)).toEqual(["hiking", "someone", "the seaside"]);
    const scores = body.facts?.map((f) => f.relevanceScore) ?? [];
    const [keyword] = await t.keywords("ds", query, body);
    expect(keyword).toBeGreaterThan(0);
    expect(scores[0]).toBeCloseTo(score({ cosine: 0.95, keyword }), COSINE_DIGITS);
    expect(scores[1]).toBeCloseTo(score({ cosine: 0.9, entity: 1 }), COSINE_DIGITS);
    expect(scores[2]).toBeCloseTo(score({ cosine: 0.99 }), COSINE_DIGITS);
    // Groups: the anchored fact under its anchor, the others under the subject; by best score.
    expect(body.groups?.map((g) => [g.entityName, g.facts.map((f) => f.object)])).toEqual([
      ["user", ["hiking", "the seaside"]],
      ["Ramona", ["someone"]],
    ]);
    // Rendering follows the groups: "user" first (best fact), its facts together, then Ramona.
    expect(body.context.split("\n").filter((l) => l.startsWith("- user"))).toEqual([
      expect.stringContaining("enjoys hiking"),
      expect.stringContaining("likes the seaside"),
      expect.stringContaining("is married to someone"),
    ]);
    expect(body.groups?.[0].groupRelevance).toBeCloseTo(score({ cosine: 0.95, keyword }), COSINE_DIGITS);
  });

  it("groups by the strongest anchor a fact touches, and lists the entities the block's facts touch", async () => {
    const t = await tenant();
    await t.entity("ds", "Lisbon", "PLACE");
    await t.entity("ds", "Acme", "ORG");
    await t.fact("ds", { predicate: "works_at", object: "Acme", embedding: null, entities: ["Acme", "Lisbon"] });
    await t.fact("ds", { predicate: "lives_in", object: "Lisbon", embedding: null, entities: ["Lisbon"] });
    await t.fact("ds", { predicate: "rents", object: "a flat", embedding: null, entities: ["Lisbon"] });
    const body = await t.recall({ dataset: "ds", query: "life in lisbon", include: ["raw"] });
    expect(body.groups?.map((g) => g.entityName)).toEqual(["Lisbon"]);
    expect(body.groups?.[0].facts).toHaveLength(3);
    expect(body.context).toContain("# ENTITIES\n- Lisbon (PLACE)\n- Acme (ORG)");
  });

  it("never reads another project's or dataset's facts, and still fills the limit when they are nearer", async () => {
    const t = await tenant();
    const other = await tenant();
    const query = "favourite board games";
    const q = fakeEmbedding(query, DIMS);
    for (let i = 0; i < 40; i++) {
      await other.fact("ds", { predicate: "likes", object: `other ${i}`, embedding: near(q, 0.99, `o${i}`) });
      await t.fact("elsewhere", { predicate: "likes", object: `elsewhere ${i}`, embedding: near(q, 0.98, `e${i}`) });
    }
    for (let i = 0; i < 12; i++) {
      await t.fact("ds", { predicate: "likes", object: `mine ${i}`, embedding: near(q, 0.1, `m${i}`) });
    }
    const body = await t.recall({ dataset: "ds", query, limit: 10, include: ["raw"] });
    expect(body.factCount).toBe(10);
    expect(objects(body).every((o) => o.startsWith("mine "))).toBe(true);
  });

  it("an entity with more facts than the anchor brings: its newest are the ones brought, in both modes", async () => {
    const t = await tenant();
    const q = fakeEmbedding("Acme", DIMS);
    const day = (i: number) => new Date(Date.UTC(2025, 0, 1 + i)).toISOString();
    // More than the anchor brings (30 at the default limit); the vector signal prefers other facts.
    for (let i = 0; i < 40; i++) {
      const embedding = near(q, 0.3, "acme");
      await t.fact("ds", {
        predicate: "noted",
        object: `Acme detail ${i}`,
        validAt: day(i),
        entities: ["Acme"],
        embedding,
      });
    }
    for (let i = 0; i < 40; i++) {
      await t.fact("ds", {
        predicate: "likes",
        object: `hobby ${i}`,
        validAt: day(100 + i),
        embedding: near(q, 0.35, `h${i}`),
      });
    }
    const newest = [39, 38, 37, 36, 35, 34, 33, 32].map((i) => `Acme detail ${i}`);
    expect(objects(await t.recall({ dataset: "ds", query: "Acme", include: ["raw"] }))).toEqual(newest);
    // Keyword and recency (rule 6): the same.
    fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
    expect(objects(await t.recall({ dataset: "ds", query: "Acme", include: ["raw"] }))).toEqual(newest);
  });
});

describe("limit, minConfidence and settings", () => {
  it("limit caps the block; the default is the project's factsInContext (8)", async () => {
    const t = await tenant();
    for (let i = 0; i < 12; i++) await t.fact("ds", { predicate: "likes", object: `thing ${i}` });
    expect((await t.recall({ dataset: "ds" })).factCount).toBe(8);
    expect((await t.recall({ dataset: "ds", limit: 3 })).factCount).toBe(3);
    expect((await t.recall({ dataset: "ds", query: "thing", limit: 11 })).factCount).toBe(11);
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { semantic: { factsInContext: 5 } });
    expect((await t.recall({ dataset: "ds" })).factCount).toBe(5);
    expect((await t.recall({ dataset: "ds", query: "thing" })).factCount).toBe(5);
  });

  it("minConfidence filters; the default is retrievalMinConfidence (0.5); a stored 0.9 passes 0.9", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "low", confidence: 0.4 });
    await t.fact("ds", { predicate: "likes", object: "edge", confidence: 0.9 });
    await t.fact("ds", { predicate: "likes", object: "mid", confidence: 0.6 });
    expect(objects(await t.recall({ dataset: "ds", include: ["raw"] })).sort()).toEqual(["edge", "mid"]);
    expect(objects(await t.recall({ dataset: "ds", minConfidence: 0.9, include: ["raw"] }))).toEqual(["edge"]);
    expect(
      objects(await t.recall({ dataset: "ds", query: "likes low", minConfidence: 0.9, include: ["raw"] })),
    ).toEqual(["edge"]);
    expect(await t.recall({ dataset: "ds", minConfidence: 0, include: ["raw"] })).toMatchObject({ factCount: 3 });
    await patchProjectSettings(
      { deps: svc.deps, projectId: t.projectId },
      { semantic: { retrievalMinConfidence: 0.3 } },
    );
    expect((await t.recall({ dataset: "ds" })).factCount).toBe(3);
  });
});

describe("without a query", () => {
  it("returns the most recent live facts by validAt, each scored 1, without an embedding call", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "old", validAt: "2024-01-01T00:00:00.000Z" });
    await t.fact("ds", { predicate: "likes", object: "new", validAt: "2026-01-01T00:00:00.000Z" });
    await t.fact("ds", { predicate: "likes", object: "middle", validAt: "2025-01-01T00:00:00.000Z" });
    await t.fact("ds", { predicate: "likes", object: "gone", invalidAt: "2026-02-01T00:00:00.000Z" });
    for (const query of [undefined, "", "   "]) {
      const body = await t.recall({ dataset: "ds", query, include: ["raw"] });
      expect(objects(body)).toEqual(["new", "middle", "old"]);
      expect(body.facts?.every((f) => f.relevanceScore === 1)).toBe(true);
    }
    expect(fake.embeddingCalls()).toHaveLength(0);
  });
});

describe("asOf", () => {
  async function moved() {
    const t = await tenant();
    // What extraction writes when "lives in Lisbon" (true from June) contradicts "lives in Paris":
    // the old fact ends at the new one's start and is invalidated when it was learned (July).
    await t.fact("ds", {
      predicate: "lives_in",
      object: "Paris",
      validAt: "2025-01-01T00:00:00.000Z",
      validUntil: "2025-06-01T00:00:00.000Z",
      invalidAt: "2025-07-01T00:00:00.000Z",
    });
    await t.fact("ds", { predicate: "lives_in", object: "Lisbon", validAt: "2025-06-01T00:00:00.000Z" });
    await t.fact("ds", { predicate: "plans", object: "a trip", validAt: "2026-03-01T00:00:00.000Z" });
    return t;
  }

  it("gives the facts true at that instant, before and after a contradiction", async () => {
    const t = await moved();
    const at = async (asOf?: string, query?: string) =>
      objects(await t.recall({ dataset: "ds", asOf, query, include: ["raw"] }));
    expect(await at("2025-03-01")).toEqual(["Paris"]);
    expect(await at("2025-06-15T00:00:00Z")).toEqual(["Lisbon"]);
    expect(await at("2025-08-01", "where does the user live")).toEqual(["Lisbon"]);
    expect(await at("2026-06-01")).toEqual(["a trip", "Lisbon"]);
    expect(await at("2024-12-31")).toEqual([]);
    expect(await at()).toEqual(["a trip", "Lisbon"]);
  });

  it("reads an ISO datetime without an offset as UTC", async () => {
    const t = await moved();
    const at = async (asOf: string) => objects(await t.recall({ dataset: "ds", asOf, include: ["raw"] }));
    // A minute either side of Paris's end, 2025-06-01T00:00Z: in any other zone the two would agree.
    expect(await at("2025-05-31T23:59:00")).toEqual(["Paris"]);
    expect(await at("2025-06-01T00:01:00")).toEqual(["Lisbon"]);
  });

  it("keeps the vector signal: the facts valid then, ranked by cosine and keyword as without asOf", async () => {
    const t = await moved();
    const body = await t.recall({ dataset: "ds", asOf: "2026-06-01", query: "trip", include: ["raw"] });
    expect(fake.embeddingCalls()).toHaveLength(1);
    const q = fakeEmbedding("trip", DIMS);
    expect(objects(body)).toEqual(["a trip", "Lisbon"]);
    const [keyword] = await t.keywords("ds", "trip", body);
    expect(keyword).toBeGreaterThan(0);
    expect(body.facts?.[0].relevanceScore).toBeCloseTo(
      score({ cosine: cosineOf(q, fakeEmbedding("user plans a trip", DIMS)), keyword }),
      COSINE_DIGITS,
    );
    expect(body.facts?.[1].relevanceScore).toBeCloseTo(
      score({ cosine: cosineOf(q, fakeEmbedding("user lives_in Lisbon", DIMS)) }),
      COSINE_DIGITS,
    );
  });

  it("never shows a fact deleted through the fact API, at any asOf; a superseded one stays in its past", async () => {
    const t = await tenant();
    const condition = await t.fact("ds", {
      predicate: "has_condition",
      object: "diabetes",
      validAt: "2025-01-01T00:00:00.000Z",
    });
    await t.fact("ds", { predicate: "lives_in", object: "Lisbon", validAt: "2025-01-01T00:00:00.000Z" });
    const res = await svc.request(`/v1/memory/semantic/datasets/ds/facts/${condition}`, {
      method: "DELETE",
      token: t.key,
    });
    expect(res.status).toBe(200);
    for (const asOf of [undefined, "2025-06-01", "2030-01-01"]) {
      const body = await t.recall({ dataset: "ds", asOf, include: ["raw"] });
      expect(objects(body), String(asOf)).toEqual(["Lisbon"]);
      expect(body.context).not.toContain("diabetes");
    }
    // Superseded (extraction's contradiction), not deleted: still true in its own past.
    const moved = await tenant();
    await moved.fact("ds", {
      predicate: "lives_in",
      object: "Paris",
      validAt: "2025-01-01T00:00:00.000Z",
      validUntil: "2025-06-01T00:00:00.000Z",
      invalidAt: "2025-07-01T00:00:00.000Z",
    });
    expect(objects(await moved.recall({ dataset: "ds", asOf: "2025-03-01", include: ["raw"] }))).toEqual(["Paris"]);
  });

  it("never shows a fact of an erased dataset", async () => {
    const t = await moved();
    await svc.request(`${RECALL}/datasets/ds`, { method: "DELETE", token: t.key });
    expect((await t.recall({ dataset: "ds", asOf: "2025-03-01" })).factCount).toBe(0);
  });
});

describe("include", () => {
  it("episodes: the top contextEpisodes by similarity and recency, the dataset's count, one embedding call", async () => {
    const t = await tenant();
    const query = "planning the garden";
    const q = fakeEmbedding(query, DIMS);
    await t.fact("ds", { predicate: "grows", object: "tomatoes" });
    await t.episode("ds", "close and recent", "2026-05-31T12:00:00.000Z", near(q, 0.9, "1"));
    await t.episode("ds", "close but old", "2024-06-01T12:00:00.000Z", near(q, 0.95, "2"));
    await t.episode("ds", "far and recent", "2026-06-01T11:00:00.000Z", near(q, 0.1, "3"));
    await t.episode("ds", "far and old", "2023-01-01T00:00:00.000Z", near(q, 0.05, "4"));
    await t.episode("other", "another dataset", "2026-06-01T11:00:00.000Z", q);
    const body = await t.recall({ dataset: "ds", query, include: ["episodes"] });
    expect(body.episodes?.episodeCount).toBe(4);
    expect(body.episodes?.episodes.map((e) => e.summary)).toEqual([
      "close and recent",
      "close but old",
      "far and recent",
    ]);
    const first = body.episodes?.episodes[0];
    // one day old: 0.9 × 0.7 + 1/(1 + 1) × 0.3
    expect(first?.relevanceScore).toBeCloseTo(0.9 * 0.7 + 0.5 * 0.3, 4);
    expect(Object.keys(first ?? {}).sort()).toEqual([
      "endedAt",
      "episodeId",
      "keyLearnings",
      "relevanceScore",
      "startedAt",
      "summary",
    ]);
    expect(fake.embeddingCalls()).toHaveLength(1);
    expect(body.context).not.toContain("close and recent");
    await patchProjectSettings(
      { deps: svc.deps, projectId: t.projectId },
      { episodic: { contextEpisodes: 1, recencyWeight: 0 } },
    );
    const one = await t.recall({ dataset: "ds", query, include: ["episodes"] });
    expect(one.episodes?.episodes.map((e) => e.summary)).toEqual(["close but old"]);
  });

  it("episodes without a query rank by recency alone", async () => {
    const t = await tenant();
    await t.episode("ds", "older", "2026-01-01T00:00:00.000Z");
    await t.episode("ds", "newer", "2026-05-01T00:00:00.000Z");
    const body = await t.recall({ dataset: "ds", include: ["episodes"] });
    expect(body.episodes?.episodes.map((e) => e.summary)).toEqual(["newer", "older"]);
    expect(fake.embeddingCalls()).toHaveLength(0);
  });

  it("synthesis: one model call over the rendered block; null when the block is empty", async () => {
    const t = await tenant();
    fake.onText((r) => `SYNTHESIS OF ${r.messages.at(-1)?.content.length} CHARS`);
    expect((await t.recall({ dataset: "ds", query: "anything", include: ["synthesis"] })).synthesis).toBeNull();
    expect(fake.chatCalls()).toHaveLength(0);
    await t.fact("ds", { predicate: "likes", object: "jazz" });
    const body = await t.recall({ dataset: "ds", query: "music taste", include: ["synthesis"] });
    expect(fake.chatCalls()).toHaveLength(1);
    const prompt = fake.chatCalls()[0].messages.at(-1)?.content ?? "";
    expect(prompt).toContain(body.context);
    expect(prompt).toContain("music taste");
    expect(body.synthesis).toBe(`SYNTHESIS OF ${prompt.length} CHARS`);
    expect(body.facts).toBeNull();
  });
});

describe("scores (docs/ranking.md: how recall ranks facts)", () => {
  it("keyword: BM25 weighs a rare word above a common one, and searches the fact's quote too", async () => {
    const t = await tenant();
    for (const [i, drink] of ["espresso", "latte", "mocha", "cortado"].entries()) {
      await t.fact("ds", {
        predicate: "orders",
        object: `coffee: ${drink}`,
        embedding: null,
        validAt: `2026-0${i + 1}-01`,
      });
    }
    await t.fact("ds", {
      predicate: "bought",
      object: "a grinder",
      embedding: null,
      sourceQuote: "I finally bought a burr grinder for matcha",
    });
    const query = "coffee or matcha?";
    const body = await t.recall({ dataset: "ds", query, include: ["raw"] });
    // "matcha" is in one fact of five (and only in its quote), "coffee" in four: the rare word wins.
    expect(objects(body)[0]).toBe("a grinder");
    expect(objects(body).slice(1).sort()).toEqual([
      "coffee: cortado",
      "coffee: espresso",
      "coffee: latte",
      "coffee: mocha",
    ]);
    const keywords = await t.keywords("ds", query, body);
    for (const [i, f] of (body.facts ?? []).entries()) {
      expect(f.relevanceScore).toBeCloseTo(score({ keyword: keywords[i] }), 12);
    }
    for (const k of keywords.slice(1)) {
      expect(k).toBeGreaterThan(0);
      expect(k).toBeLessThan(keywords[0] / 2);
    }
  });

  it("keyword: a match on one common word alone is not a full match, so the fact nearest by meaning keeps its place", async () => {
    const t = await tenant();
    const query = "How do I stay active at weekends?";
    const q = fakeEmbedding(query, DIMS);
    // The fact the question means shares no word with it; five others hold "weekend" (a word of a
    // quarter of the dataset), far from it by meaning; fifteen more hold neither.
    const squash = await t.fact("ds", {
      predicate: "plays",
      object: "squash",
      sourceQuote: "I play squash every Saturday",
      embedding: near(q, 0.4, "squash"),
    });
    for (const name of ["Anna", "Oskar", "Marco", "Noor", "Leila"]) {
      await t.fact("ds", {
        predicate: "visits",
        object: name,
        sourceQuote: `${name} comes over most weekends`,
        embedding: near(q, 0.1, name),
      });
    }
    for (let i = 0; i < 15; i++) {
      await t.fact("ds", { predicate: "owns", object: `book ${i}`, embedding: near(q, 0.05, `book ${i}`) });
    }
    const body = await t.recall({ dataset: "ds", query, include: ["raw"], limit: 3 });
    expect(body.facts?.[0].factId).toBe(squash);
    const keywords = await t.keywords("ds", query, body);
    // Divided by the best candidate's BM25 alone, each "weekend" fact had 1: 0.5 + 0.1 over 0.4.
    for (const k of keywords.slice(1)) {
      expect(k).toBeGreaterThan(0);
      expect(k).toBeLessThan(0.5);
    }
    for (const [i, f] of (body.facts ?? []).entries()) {
      expect(f.relevanceScore).toBeCloseTo(score({ cosine: i === 0 ? 0.4 : 0.1, keyword: keywords[i] }), COSINE_DIGITS);
    }
  });

  it("keyword: a word held by most of a large dataset brings no candidates of its own, but still scores", async () => {
    const t = await tenant();
    // 101 of 102 facts hold "coffee" (more than KEYWORD_PER_TERM and than 5%): it gathers nothing.
    for (let i = 0; i < 101; i++) {
      await t.fact("ds", { predicate: "tried", object: `coffee number ${i}`, embedding: null, sourceQuote: "so" });
    }
    const matcha = await t.fact("ds", { predicate: "tried", object: "matcha coffee", embedding: null });
    expect(objects(await t.recall({ dataset: "ds", query: "coffee", include: ["raw"] }))).toEqual([]);
    // A rarer word of the query brings its facts, and the common one adds to their score.
    const body = await t.recall({ dataset: "ds", query: "matcha coffee", include: ["raw"] });
    expect(body.facts?.map((f) => f.factId)).toEqual([matcha]);
    const [keyword] = await t.keywords("ds", "matcha coffee", body);
    // A word no other fact holds and one nearly all hold: more than half a full match, not a full one.
    expect(keyword).toBeGreaterThan(1 / KEYWORD_FULL_MATCH_WORDS);
    expect(keyword).toBeLessThan(1);
    expect(body.facts?.[0].relevanceScore).toBeCloseTo(score({ keyword }), 12);
  });

  it("keyword: in a small dataset a word more than KEYWORD_COMMON_MIN_DOCS facts hold (and more than 5%) brings none of them; one that many hold brings them all", async () => {
    const t = await tenant();
    // 100 facts: 21 hold "tea" (more than the floor and than 5%), 20 hold "cocoa" (the floor).
    const cocoa: string[] = [];
    for (let i = 0; i < 100; i++) {
      const object = i < KEYWORD_COMMON_MIN_DOCS + 1 ? `tea number ${i}` : i < 41 ? `cocoa number ${i}` : `water ${i}`;
      const id = await t.fact("ds", { predicate: "tried", object, embedding: null, sourceQuote: "so" });
      if (object.startsWith("cocoa")) cocoa.push(id);
    }
    expect(cocoa).toHaveLength(KEYWORD_COMMON_MIN_DOCS);
    expect(objects(await t.recall({ dataset: "ds", query: "tea", include: ["raw"], limit: 30 }))).toEqual([]);
    const body = await t.recall({ dataset: "ds", query: "cocoa", include: ["raw"], limit: 30 });
    expect(body.facts?.map((f) => f.factId).sort()).toEqual([...cocoa].sort());
  });

  it("time: a query naming a time lifts the facts that became valid in it, and those valid during it half as much", async () => {
    const t = await tenant();
    const q = fakeEmbedding("what did I do in May 2025?", DIMS);
    const may = await t.fact("ds", {
      predicate: "ran",
      object: "a marathon",
      embedding: near(q, 0.5, "m"),
      validAt: "2025-05-18",
    });
    const before = await t.fact("ds", {
      predicate: "lives_in",
      object: "Porto",
      embedding: near(q, 0.5, "p"),
      validAt: "2024-01-01",
    });
    const after = await t.fact("ds", {
      predicate: "visited",
      object: "Rome",
      embedding: near(q, 0.5, "r"),
      validAt: "2025-09-01",
    });
    const body = await t.recall({ dataset: "ds", query: "what did I do in May 2025?", include: ["raw"] });
    const scoreOf = (id: string) => body.facts?.find((f) => f.factId === id)?.relevanceScore;
    expect(body.facts?.map((f) => f.factId)).toEqual([may, before, after]);
    expect(scoreOf(may)).toBeCloseTo(score({ cosine: 0.5, time: 1 }), COSINE_DIGITS);
    expect(scoreOf(before)).toBeCloseTo(score({ cosine: 0.5, time: 0.5 }), COSINE_DIGITS);
    expect(scoreOf(after)).toBeCloseTo(score({ cosine: 0.5 }), COSINE_DIGITS);
  });

  it("time: a query naming a time brings the facts that became valid in it, however far their meaning and words", async () => {
    const t = await tenant();
    const question = "what did I do in May 2025?";
    const q = fakeEmbedding(question, DIMS);
    // More facts nearer the question than the vector search takes (depth ≥ 30), none in May 2025.
    for (let i = 0; i < 40; i++) {
      await t.fact("ds", {
        predicate: "visited",
        object: `town ${i}`,
        embedding: near(q, 0.6, `t${i}`),
        validAt: "2025-09-01",
      });
    }
    const may = await t.fact("ds", {
      predicate: "ran",
      object: "a marathon",
      embedding: near(q, 0.5, "m"),
      validAt: "2025-05-18",
    });
    const body = await t.recall({ dataset: "ds", query: question, include: ["raw"] });
    expect(body.facts?.[0]?.factId).toBe(may);
    expect(body.facts?.[0]?.relevanceScore).toBeCloseTo(score({ cosine: 0.5, time: 1 }), COSINE_DIGITS);
    // Without the time, it is not a candidate at all.
    expect(
      (await t.recall({ dataset: "ds", query: "what did I do?", include: ["raw"] })).facts?.map((f) => f.factId),
    ).not.toContain(may);
  });

  it("entity, second hop: the entities of the facts holding the query's words boost the facts touching them", async () => {
    const t = await tenant();
    const question = "Which city is my brother based in?";
    const q = fakeEmbedding(question, DIMS);
    // No embeddings: neither is an entity near the query; only the hop can point at them.
    for (const name of ["Anna", "Noor"]) await t.entity("ds", name, "PERSON", null);
    await t.fact("ds", {
      predicate: "has_brother",
      object: "Anna",
      sourceQuote: "my brother Anna is staying with us",
      embedding: near(q, 0.2, "b"),
      entities: ["Anna"],
    });
    await t.fact("ds", {
      predicate: "has_sister",
      object: "Noor",
      sourceQuote: "my sister Noor is staying with us",
      embedding: near(q, 0.2, "s"),
      entities: ["Noor"],
    });
    const anna = await t.fact("ds", {
      predicate: "knows_that",
      object: "Anna works at Heineken in Edinburgh",
      embedding: near(q, 0.5, "a"),
      entities: ["Anna"],
    });
    const noor = await t.fact("ds", {
      predicate: "knows_that",
      object: "Noor works at Bosch in Denver",
      embedding: near(q, 0.55, "n"),
      entities: ["Noor"],
    });
    const body = await t.recall({ dataset: "ds", query: question, include: ["raw"] });
    const ranked = body.facts?.map((f) => f.factId) ?? [];
    expect(ranked.indexOf(anna)).toBeGreaterThanOrEqual(0);
    expect(ranked.indexOf(anna)).toBeLessThan(ranked.indexOf(noor));
    const scoreOf = (id: string) => body.facts?.find((f) => f.factId === id)?.relevanceScore;
    expect(scoreOf(anna)).toBeCloseTo(score({ cosine: 0.5, entity: 1 }), COSINE_DIGITS);
    expect(scoreOf(noor)).toBeCloseTo(score({ cosine: 0.55 }), COSINE_DIGITS);
  });

  /**
   * "has_brother Anna" holds the question's words; "Anna works at Heineken in Edinburgh" shares
   * none of them and is farther from it by meaning than 40 other facts, more than the vector
   * search takes (at least 30): only the hop can bring it.
   */
  async function brotherAndFarJob(brotherConfidence = 0.9) {
    const t = await tenant();
    const q = fakeEmbedding(BROTHER_QUESTION, DIMS);
    await t.entity("ds", "Anna", "PERSON", null);
    await t.fact("ds", {
      predicate: "has_brother",
      object: "Anna",
      confidence: brotherConfidence,
      sourceQuote: "my brother Anna is staying with us",
      embedding: near(q, 0.2, "b"),
      entities: ["Anna"],
    });
    const job = await t.fact("ds", {
      predicate: "knows_that",
      object: "Anna works at Heineken in Edinburgh",
      embedding: near(q, 0.15, "a"),
      entities: ["Anna"],
    });
    for (let i = 0; i < 40; i++) {
      await t.fact("ds", { predicate: "owns", object: `thing ${i}`, embedding: near(q, 0.2, `t${i}`) });
    }
    const recall = () => t.recall({ dataset: "ds", query: BROTHER_QUESTION, include: ["raw"], limit: 3 });
    return { t, q, job, recall };
  }
  const BROTHER_QUESTION = "Which city is my brother based in?";

  it("entity, second hop: the facts touching the hop's entities are candidates, however far by meaning", async () => {
    const { t, q, job, recall } = await brotherAndFarJob();
    const body = await recall();
    expect(body.facts?.map((f) => f.factId)).toContain(job);
    const scoreOf = (id: string) => body.facts?.find((f) => f.factId === id)?.relevanceScore;
    expect(scoreOf(job)).toBeCloseTo(score({ cosine: 0.15, entity: 1 }), COSINE_DIGITS);
    // An entity touching more facts than the search depth (30 here) brings none: its facts are
    // read no further than that (lib/recall/retrieve.ts, hopCtes).
    for (let i = 0; i < 30; i++) {
      await t.fact("ds", {
        predicate: "heard_from_anna",
        object: `story ${i}`,
        embedding: near(q, 0, `s${i}`),
        entities: ["Anna"],
      });
    }
    expect((await recall()).facts?.map((f) => f.factId)).not.toContain(job);
  });

  it("entity, second hop: a fact recall would not return (below the confidence floor) is no hop source", async () => {
    const { job, recall } = await brotherAndFarJob(0.1);
    expect((await recall()).facts?.map((f) => f.factId)).not.toContain(job);
  });

  it("weights are project settings read in the statement: keywordWeight 0 leaves cosine alone", async () => {
    const t = await tenant();
    const q = fakeEmbedding("sailing lessons", DIMS);
    await t.fact("ds", { predicate: "took", object: "sailing lessons", embedding: near(q, 0.6, "s") });
    await t.fact("ds", { predicate: "likes", object: "the sea", embedding: near(q, 0.7, "t") });
    const ranked = async () => objects(await t.recall({ dataset: "ds", query: "sailing lessons", include: ["raw"] }));
    expect(await ranked()).toEqual(["sailing lessons", "the sea"]);
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { semantic: { keywordWeight: 0 } });
    expect(await ranked()).toEqual(["the sea", "sailing lessons"]);
  });

  it("the keyword statistics follow every write: insert, a soft delete (kept), a hard delete, a project's deletion", async () => {
    const t = await tenant();
    const stats = async () =>
      rowsOf(
        await svc.deps.db.execute(sql`SELECT term, docs::int AS docs FROM fact_terms
          WHERE project_id = ${t.projectId} AND term IN ('', 'kayak') ORDER BY term`),
      );
    const first = await t.fact("ds", { predicate: "owns", object: "a kayak" });
    await t.fact("ds", { predicate: "rents", object: "a kayak" });
    await t.fact("ds", { predicate: "likes", object: "rivers" });
    expect(await stats()).toEqual([
      { term: "", docs: 3 },
      { term: "kayak", docs: 2 },
    ]);
    // DELETE /v1/facts/:id invalidates: the row, and what a word's rarity is measured over, stay.
    expect(
      (await svc.request(`/v1/memory/semantic/datasets/ds/facts/${first}`, { method: "DELETE", token: t.key })).status,
    ).toBe(200);
    expect(await stats()).toEqual([
      { term: "", docs: 3 },
      { term: "kayak", docs: 2 },
    ]);
    await svc.deps.db.execute(sql`DELETE FROM facts WHERE id = ${first}`);
    expect(await stats()).toEqual([
      { term: "", docs: 2 },
      { term: "kayak", docs: 1 },
    ]);
    await deleteProject({ deps: svc.deps, projectId: t.projectId });
    expect(await stats()).toEqual([]);
  });
});

describe("reranker (project setting rerank)", () => {
  async function withFacts() {
    const t = await tenant();
    const q = fakeEmbedding("where should we eat tonight", DIMS);
    await t.fact("ds", { predicate: "likes", object: "pizza", embedding: near(q, 0.9, "a") });
    await t.fact("ds", { predicate: "avoids", object: "gluten", embedding: near(q, 0.8, "b") });
    await t.fact("ds", { predicate: "loves", object: "ramen", embedding: near(q, 0.7, "c") });
    await patchProjectSettings(
      { deps: svc.deps, projectId: t.projectId },
      { semantic: { rerank: true, rerankCandidates: 3 } },
    );
    return t;
  }
  const query = { dataset: "ds", query: "where should we eat tonight", include: ["raw"], limit: 2 };

  it("reorders the fused top candidates, then keeps the block's limit; still one SQL statement", async () => {
    const t = await withFacts();
    reranker.score = (_q, doc) => (doc.includes("ramen") ? 0.9 : doc.includes("gluten") ? 0.5 : 0.1);
    statements.length = 0;
    const res = await svc.request(RECALL, { method: "POST", token: t.key, json: query });
    const body = (await res.json()) as Recall;
    expect(objects(body)).toEqual(["ramen", "gluten"]);
    expect(reranker.requests).toHaveLength(1);
    // The fused order is what the reranker gets: what each fact says, then the user's words.
    expect(reranker.requests[0]?.body.documents).toEqual([
      'user likes pizza (said: "I said pizza")',
      'user avoids gluten (said: "I said gluten")',
      'user loves ramen (said: "I said ramen")',
    ]);
    expect(res.headers.get("server-timing")).toMatch(/rerank;dur=[\d.]+;desc="reranked"/);
    // Authentication and recall; the reranker's call, made after recall's statement, waits for a
    // later statement to carry it into the usage ledger (lib/usage/backlog.ts): with no request
    // coming, one statement after the response.
    expect(statements).toHaveLength(2);
    await svc.settle();
    expect(statements).toHaveLength(3);
    expect(statements[2]).toMatch(/^INSERT INTO "usage_events"/);
  });

  it("a failure or a timeout keeps the fused order and answers 200", async () => {
    const t = await withFacts();
    reranker.fail({ status: 503, times: 1 });
    const failed = await svc.request(RECALL, { method: "POST", token: t.key, json: query });
    expect(failed.status).toBe(200);
    expect(objects((await failed.json()) as Recall)).toEqual(["pizza", "gluten"]);
    expect(failed.headers.get("server-timing")).toMatch(/rerank;dur=[\d.]+;desc="failed"/);

    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { semantic: { rerankTimeoutMs: 200 } });
    reranker.fail({ hang: true, times: 1 });
    const started = performance.now();
    const slow = await svc.request(RECALL, { method: "POST", token: t.key, json: query });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(slow.status).toBe(200);
    expect(objects((await slow.json()) as Recall)).toEqual(["pizza", "gluten"]);
    expect(slow.headers.get("server-timing")).toMatch(/rerank;dur=[\d.]+;desc="timeout"/);
  });

  it("is not called without a query, or when the project leaves it off", async () => {
    const t = await withFacts();
    await t.recall({ dataset: "ds", include: ["raw"] });
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { semantic: { rerank: false } });
    expect(objects(await t.recall(query))).toEqual(["pizza", "gluten"]);
    expect(reranker.requests).toHaveLength(0);
  });
});

describe("degradation (rule 6)", () => {
  it("embedding failure: keyword plus recency, still 200", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "sailing", validAt: "2025-01-01T00:00:00.000Z" });
    await t.fact("ds", { predicate: "likes", object: "poetry", validAt: "2026-01-01T00:00:00.000Z" });
    fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
    const body = await t.recall({ dataset: "ds", query: "sailing trips", include: ["raw"] });
    // The keyword match first; the newest facts follow, scoring 0 (no cosine without an embedding).
    expect(objects(body)).toEqual(["sailing", "poetry"]);
    const [keyword] = await t.keywords("ds", "sailing trips", body);
    expect(keyword).toBeGreaterThan(0);
    expect(body.facts?.[0].relevanceScore).toBeCloseTo(score({ keyword }), 12);
    expect(body.facts?.[1].relevanceScore).toBe(0);
    // A failed embedding is not cached: the next call embeds again.
    await t.recall({ dataset: "ds", query: "sailing trips" });
    expect(fake.embeddingCalls()).toHaveLength(2);
  });

  it("a query longer than the embedding model's window is embedded by its head: ranked by meaning still", async () => {
    const t = await tenant();
    const query = "seafaring ".repeat(120).trim(); // 1,199 characters: 300 tokens; its head 125
    await t.fact("ds", {
      predicate: "likes",
      object: "sailing",
      validAt: "2025-01-01T00:00:00.000Z",
      embedding: query,
    });
    await t.fact("ds", { predicate: "likes", object: "poetry", validAt: "2026-01-01T00:00:00.000Z" });
    fake.maxInputTokens = 200;
    const body = await t.recall({ dataset: "ds", query, include: ["raw"] });
    // No shared word: by recency alone poetry would come first.
    expect(objects(body)).toEqual(["sailing", "poetry"]);
    expect(body.facts?.[0].relevanceScore).toBeGreaterThan(0);
    expect(fake.embeddingCalls().map((c) => c.input[0].length)).toEqual([1_199, 500]);
  });

  it("synthesis failure: synthesis null, the rest intact", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "jazz" });
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const body = await t.recall({ dataset: "ds", query: "jazz", include: ["synthesis", "raw"] });
    expect(body.synthesis).toBeNull();
    expect(objects(body)).toEqual(["jazz"]);
  });

  it("fact fetch failure: facts [] and an empty context, episodes still there", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "jazz" });
    await t.episode("ds", "talked about jazz", "2026-05-01T00:00:00.000Z");
    failStatementsMatching = /\bgrouped\b/;
    const body = await t.recall({ dataset: "ds", query: "jazz", include: ["raw", "episodes"] });
    expect(body).toMatchObject({ context: "", factCount: 0, facts: [], groups: [] });
    expect(body.episodes?.episodes.map((e) => e.summary)).toEqual(["talked about jazz"]);
  });

  it("episode fetch failure: episodes null, facts intact", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "jazz" });
    failStatementsMatching = /\branked_episodes\b/;
    const body = await t.recall({ dataset: "ds", query: "jazz", include: ["raw", "episodes"] });
    expect(body.episodes).toBeNull();
    expect(objects(body)).toEqual(["jazz"]);
  });

  it("nothing readable at all: 500 Failed to recall memory", async () => {
    const t = await tenant();
    failStatementsMatching = /\bWITH s AS\b/;
    const res = await svc.request(RECALL, { method: "POST", token: t.key, json: { dataset: "ds", query: "jazz" } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "Failed to recall memory" });
  });
});

describe("cost", () => {
  it("one SQL statement after authentication, with or without a query, with episodes too", async () => {
    const t = await tenant();
    await t.fact("ds", { predicate: "likes", object: "jazz", entities: ["Jazz Club"] });
    for (const body of [
      { dataset: "ds" },
      { dataset: "ds", query: "jazz club" },
      { dataset: "ds", query: "jazz", include: ["episodes", "raw"] },
      { dataset: "ds", query: "jazz", asOf: "2026-05-01" },
    ]) {
      statements.length = 0;
      await t.recall(body);
      expect(statements, JSON.stringify(body)).toHaveLength(2);
    }
  });

  it("a repeated query is embedded once (cached), and Server-Timing reports the parts", async () => {
    const t = await tenant();
    const first = await svc.request(RECALL, {
      method: "POST",
      token: t.key,
      json: { dataset: "ds", query: "cache me" },
    });
    expect(first.headers.get("server-timing")).toMatch(/embedding;dur=[\d.]+,.*sql;dur=[\d.]+/);
    const second = await svc.request(RECALL, {
      method: "POST",
      token: t.key,
      json: { dataset: "ds", query: "cache me" },
    });
    expect(second.headers.get("server-timing")).toMatch(/embedding;dur=0(\.0)?;desc="cached"/);
    await t.recall({ dataset: "ds", query: "cache me, but different" });
    expect(fake.embeddingCalls().map((c) => c.input)).toEqual([["cache me"], ["cache me, but different"]]);
  });
});

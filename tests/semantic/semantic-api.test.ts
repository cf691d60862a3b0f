import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { manualClock } from "../../lib/clock";
import { rowsOf, toIso } from "../../lib/db/rows";
import { newId } from "../../lib/ids";
import type { ApiSchema, Body, ValidationError } from "../helpers/api-types";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The semantic memory read/delete API under /v1/memory/semantic, against the spec's shapes,
 * lifecycle and errors. Facts and entities are written straight into the tables (extraction is
 * tested elsewhere), each test in its own project.
 */
const S = "/v1/memory/semantic";
const BUDGET = 2;

const statements: string[] = [];
let recording = false;
/** The next statement matching this fails at the driver boundary, before it is sent. */
let failNext: RegExp | undefined;
let svc: TestService;
let clock: ReturnType<typeof manualClock>;

beforeAll(async () => {
  svc = await createTestService({
    manualTime: true,
    onQuery: (statement) => {
      if (recording) statements.push(statement);
      if (failNext?.test(statement)) {
        failNext = undefined;
        throw new Error("connection reset");
      }
    },
  });
  clock = svc.clock as ReturnType<typeof manualClock>;
});
afterAll(() => svc?.close());

type Fact = ApiSchema<"Fact">;
type FactList = Body<"/v1/memory/semantic/datasets/{dataset}/facts", "get", 200>;

const FACT_KEYS = [
  "confidence",
  "episodeId",
  "factId",
  "invalidAt",
  "object",
  "objectIsEntity",
  "predicate",
  "relevanceScore",
  "sourceQuote",
  "subject",
  "validAt",
  "validUntil",
];

const enc = encodeURIComponent;
const vector = (seed: number) =>
  `[${Array.from({ length: TEST_EMBEDDING_DIMENSIONS }, (_, i) => ((seed + i) % 7) / 7).join(",")}]`;

async function json<T>(res: Response, status: number): Promise<T> {
  const body = await res.text();
  expect(res.status, body).toBe(status);
  return JSON.parse(body) as T;
}

function expectValidation(body: ValidationError, path: string[]) {
  expect(body.error).toBe("Validation error");
  expect(body.issues.map((i) => i.path)).toContainEqual(path);
}

interface FactInput {
  subject?: string;
  predicate?: string;
  object?: string;
  objectIsEntity?: boolean;
  confidence?: number;
  sourceQuote?: string;
  validAt?: string;
  validUntil?: string | null;
  invalidAt?: string | null;
  episodeId?: string | null;
  embedding?: boolean;
}

/** A project with an API key, and writers for its semantic rows. */
async function tenant(name = "semantic") {
  const t = await newTenant(svc, `${name}-${randomUUID().slice(0, 6)}`);
  let seq = 0;
  const api = {
    ...t,
    get: (path: string, init: Parameters<TestService["request"]>[1] = {}) =>
      svc.request(path, { ...init, token: t.key }),
    async fact(dataset: string, input: FactInput = {}) {
      const id = newId("fct");
      seq++;
      const f = {
        subject: "user",
        predicate: "likes",
        object: `thing ${seq}`,
        objectIsEntity: false,
        confidence: 0.9,
        sourceQuote: `I like thing ${seq}`,
        validAt: new Date(Date.UTC(2025, 0, 1) + seq * 60_000).toISOString(),
        validUntil: null,
        invalidAt: null,
        episodeId: "epi_default",
        embedding: true,
        ...input,
      };
      await svc.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, episode_id, subject, predicate, object, object_is_entity,
                           confidence, source_quote, valid_at, valid_until, invalid_at, embedding)
        VALUES (${id}, ${t.projectId}, ${dataset}, ${f.episodeId}, ${f.subject}, ${f.predicate}, ${f.object},
                ${f.objectIsEntity}, ${f.confidence}, ${f.sourceQuote}, ${f.validAt}::timestamptz,
                ${f.validUntil}::timestamptz, ${f.invalidAt}::timestamptz,
                ${f.embedding ? vector(seq) : null}::vector)`);
      return id;
    },
    async entity(dataset: string, entityName: string, type = "ORG") {
      const id = newId("ent");
      await svc.deps.db.execute(sql`
        INSERT INTO entities (id, project_id, dataset, name, type, embedding)
        VALUES (${id}, ${t.projectId}, ${dataset}, ${entityName}, ${type}, ${vector(entityName.length)}::vector)`);
      return id;
    },
    async link(factId: string, ...entityIds: string[]) {
      for (const entityId of entityIds) {
        await svc.deps.db.execute(sql`INSERT INTO fact_entities (fact_id, entity_id) VALUES (${factId}, ${entityId})`);
      }
    },
    facts: (dataset: string, query = "") => api.get(`${S}/datasets/${enc(dataset)}/facts${query}`),
    list: async (dataset: string, query = "") => json<FactList>(await api.facts(dataset, query), 200),
    ids: async (dataset: string, query = "") => (await api.list(dataset, query)).facts.map((f) => f.factId),
    remove: (dataset: string, factId: string) =>
      api.get(`${S}/datasets/${enc(dataset)}/facts/${enc(factId)}`, { method: "DELETE" }),
    entities: (dataset: string) => api.get(`${S}/datasets/${enc(dataset)}/entities`),
    entityFacts: (dataset: string, entityName: string) =>
      api.get(`${S}/datasets/${enc(dataset)}/entities/${enc(entityName)}/facts`),
  };
  return api;
}
type Tenant = Awaited<ReturnType<typeof tenant>>;

async function row(factId: string) {
  const [r] = rowsOf<{ invalid_at: unknown; valid_until: unknown; source_quote: string; has_embedding: boolean }>(
    await svc.deps.db.execute(
      sql`SELECT invalid_at, valid_until, source_quote, embedding IS NOT NULL AS has_embedding FROM facts WHERE id = ${factId}`,
    ),
  );
  return r ? { ...r, invalid_at: toIso(r.invalid_at), valid_until: toIso(r.valid_until) } : undefined;
}

// -------------------------------------------------------------------------------------------------

describe("GET /datasets/:dataset/facts", () => {
  it("returns the spec's Fact fields, relevanceScore 1, with total", async () => {
    const t = await tenant();
    const id = await t.fact("ds", {
      subject: "user",
      predicate: "works_at",
      object: "Acme",
      objectIsEntity: true,
      confidence: 0.9,
      sourceQuote: "I work at Acme",
      validAt: "2025-03-04T05:06:07.089Z",
      validUntil: "2026-03-04T00:00:00.000Z",
      episodeId: "epi_source",
    });
    const noEmbedding = await t.fact("ds", { embedding: false, validAt: "2025-01-01T00:00:00.000Z", episodeId: null });

    const body = await t.list("ds");
    expect(Object.keys(body).sort()).toEqual(["facts", "total"]);
    expect(body.total).toBe(2);
    for (const f of body.facts) expect(Object.keys(f).sort()).toEqual(FACT_KEYS);
    expect(body.facts[0]).toEqual({
      factId: id,
      subject: "user",
      predicate: "works_at",
      object: "Acme",
      objectIsEntity: true,
      confidence: 0.9,
      sourceQuote: "I work at Acme",
      validAt: "2025-03-04T05:06:07.089Z",
      validUntil: "2026-03-04T00:00:00.000Z",
      invalidAt: null,
      episodeId: "epi_source",
      relevanceScore: 1,
    });
    expect(body.facts[1]).toMatchObject({ factId: noEmbedding, episodeId: null, objectIsEntity: false });
  });

  it("orders by validAt descending, ties by factId descending, and lists live facts only by default", async () => {
    const t = await tenant();
    const old = await t.fact("ds", { validAt: "2024-01-01T00:00:00.000Z" });
    const newest = await t.fact("ds", { validAt: "2025-06-01T00:00:00.000Z" });
    const tieA = await t.fact("ds", { validAt: "2025-01-01T00:00:00.000Z" });
    const tieB = await t.fact("ds", { validAt: "2025-01-01T00:00:00.000Z" });
    const superseded = await t.fact("ds", {
      validAt: "2025-12-01T00:00:00.000Z",
      invalidAt: "2025-12-02T00:00:00.000Z",
    });
    const ties = [tieA, tieB].sort().reverse();

    const live = await t.list("ds");
    expect(live.facts.map((f) => f.factId)).toEqual([newest, ...ties, old]);
    expect(live.total).toBe(4);
    const all = await t.list("ds", "?includeInvalidated=true");
    expect(all.facts.map((f) => f.factId)).toEqual([superseded, newest, ...ties, old]);
    expect(all.total).toBe(5);
    expect(all.facts[0].invalidAt).toBe("2025-12-02T00:00:00.000Z");
  });

  it("caps at 50 by default and at limit, while total counts every matching fact", async () => {
    const t = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < 103; i++) ids.push(await t.fact("many"));
    await t.fact("many", { invalidAt: "2026-01-01T00:00:00.000Z" });
    const newestFirst = [...ids].reverse();

    const byDefault = await t.list("many");
    expect(byDefault.facts.map((f) => f.factId)).toEqual(newestFirst.slice(0, 50));
    expect(byDefault.total).toBe(103);
    const two = await t.list("many", "?limit=2");
    expect(two.facts.map((f) => f.factId)).toEqual(newestFirst.slice(0, 2));
    expect(two.total).toBe(103);
    const max = await t.list("many", "?limit=100");
    expect(max.facts).toHaveLength(100);
    expect(max.total).toBe(103);
    expect((await t.list("many", "?limit=1&includeInvalidated=1")).total).toBe(104);
    expect(await t.list("empty")).toEqual({ facts: [], total: 0 });
  });

  it.each(["0", "101", "abc", "-1", "1.5", ""])("rejects limit=%j with 400 (never clamped)", async (limit) => {
    const t = await tenant();
    await t.fact("ds");
    expectValidation(await json<ValidationError>(await t.facts("ds", `?limit=${limit}`), 400), ["limit"]);
  });

  it("filters by episodeId", async () => {
    const t = await tenant();
    const a1 = await t.fact("ds", { episodeId: "epi_a" });
    const a2 = await t.fact("ds", { episodeId: "epi_a" });
    await t.fact("ds", { episodeId: "epi_b" });
    const aGone = await t.fact("ds", { episodeId: "epi_a", invalidAt: "2026-01-01T00:00:00.000Z" });
    await t.fact("other-ds", { episodeId: "epi_a" });

    expect(await t.list("ds", "?episodeId=epi_a")).toMatchObject({ total: 2 });
    expect(await t.ids("ds", "?episodeId=epi_a")).toEqual([a2, a1]);
    expect(await t.ids("ds", "?episodeId=epi_a&includeInvalidated=true")).toEqual([aGone, a2, a1]);
    expect(await t.list("ds", "?episodeId=epi_unknown")).toEqual({ facts: [], total: 0 });
    expectValidation(await json<ValidationError>(await t.facts("ds", "?episodeId="), 400), ["episodeId"]);
  });

  it("filters by entity name, case-insensitively, through fact_entities", async () => {
    const t = await tenant();
    const acmeOrg = await t.entity("ds", "Acme", "ORG");
    const acmeProduct = await t.entity("ds", "ACME", "PRODUCT");
    const bob = await t.entity("ds", "Bob", "PERSON");
    const works = await t.fact("ds", { predicate: "works_at", object: "Acme" });
    const uses = await t.fact("ds", { predicate: "uses", object: "ACME" });
    const both = await t.fact("ds", { predicate: "told Bob about", object: "Acme" });
    const friend = await t.fact("ds", { predicate: "friend_of", object: "Bob" });
    const gone = await t.fact("ds", { predicate: "worked_at", object: "Acme", invalidAt: "2026-01-01T00:00:00.000Z" });
    // Mentions Acme in its text but is not linked: the filter follows links, not words.
    await t.fact("ds", { object: "Acme stock" });
    await t.link(works, acmeOrg);
    await t.link(uses, acmeProduct);
    await t.link(both, acmeOrg, acmeProduct, bob);
    await t.link(friend, bob);
    await t.link(gone, acmeOrg);

    const acme = await t.list("ds", "?entity=acme");
    expect(acme.facts.map((f) => f.factId)).toEqual([both, uses, works]);
    expect(acme.total).toBe(3);
    expect(await t.ids("ds", "?entity=ACME&includeInvalidated=true")).toEqual([gone, both, uses, works]);
    expect(await t.ids("ds", "?entity=bob")).toEqual([friend, both]);
    expect(await t.ids("ds", "?entity=bob&episodeId=epi_default&limit=1")).toEqual([friend]);
    expect(await t.list("ds", "?entity=Nobody")).toEqual({ facts: [], total: 0 });
    expectValidation(await json<ValidationError>(await t.facts("ds", "?entity="), 400), ["entity"]);
  });

  it("does not match an entity of another dataset with the same name", async () => {
    const t = await tenant();
    const elsewhere = await t.entity("other", "Acme");
    const fact = await t.fact("ds");
    // A link across datasets never comes from extraction; the entity's dataset is checked anyway.
    await t.link(fact, elsewhere);
    expect(await t.list("ds", "?entity=Acme")).toEqual({ facts: [], total: 0 });
  });

  it("coerces includeInvalidated from true/false/1/0 and rejects anything else", async () => {
    const t = await tenant();
    const live = await t.fact("ds");
    const gone = await t.fact("ds", { invalidAt: "2026-01-01T00:00:00.000Z" });
    for (const value of ["true", "1"]) expect(await t.ids("ds", `?includeInvalidated=${value}`)).toEqual([gone, live]);
    for (const value of ["false", "0"]) expect(await t.ids("ds", `?includeInvalidated=${value}`)).toEqual([live]);
    for (const value of ["yes", "TRUE", "2", ""]) {
      expectValidation(await json<ValidationError>(await t.facts("ds", `?includeInvalidated=${value}`), 400), [
        "includeInvalidated",
      ]);
    }
  });

  it("rejects an over-long dataset name on every route", async () => {
    const t = await tenant();
    const long = "d".repeat(257);
    for (const res of [
      await t.facts(long),
      await t.remove(long, "fct_x"),
      await t.entities(long),
      await t.entityFacts(long, "Acme"),
    ]) {
      expectValidation(await json<ValidationError>(res, 400), ["dataset"]);
    }
    expect(await t.list("d".repeat(256))).toEqual({ facts: [], total: 0 });
  });
});

describe("DELETE /datasets/:dataset/facts/:factId", () => {
  it("stamps invalidAt with the clock, keeps the row, and moves the fact out of the default list", async () => {
    const t = await tenant();
    const keep = await t.fact("ds");
    const target = await t.fact("ds", { validUntil: null });
    const bounded = await t.fact("ds", { validUntil: "2027-01-01T00:00:00.000Z" });
    clock.set(new Date("2026-02-03T04:05:06.789Z"));

    expect(await json(await t.remove("ds", target), 200)).toEqual({
      factId: target,
      invalidatedAt: "2026-02-03T04:05:06.789Z",
    });
    expect(await json(await t.remove("ds", bounded), 200)).toMatchObject({ factId: bounded });

    // Only invalid_at: validUntil (when it stopped being true in the world) is not touched.
    expect(await row(target)).toMatchObject({
      invalid_at: "2026-02-03T04:05:06.789Z",
      valid_until: null,
      has_embedding: true,
    });
    expect(await row(bounded)).toMatchObject({ valid_until: "2027-01-01T00:00:00.000Z" });

    expect(await t.list("ds")).toEqual({ facts: [expect.objectContaining({ factId: keep })], total: 1 });
    const all = await t.list("ds", "?includeInvalidated=true");
    expect(all.total).toBe(3);
    expect(all.facts.find((f) => f.factId === target)).toMatchObject({
      invalidAt: "2026-02-03T04:05:06.789Z",
      validUntil: null,
      sourceQuote: expect.stringMatching(/^I like thing/),
    });
  });

  it("answers 404 Fact not found on a second call, leaving the first stamp", async () => {
    const t = await tenant();
    const id = await t.fact("ds");
    clock.set(new Date("2026-03-01T00:00:00.000Z"));
    expect((await t.remove("ds", id)).status).toBe(200);
    clock.advance(60_000);
    expect(await json(await t.remove("ds", id), 404)).toEqual({ error: "Fact not found" });
    expect((await row(id))?.invalid_at).toBe("2026-03-01T00:00:00.000Z");
  });

  it("answers 404 for a fact already superseded, without restamping it", async () => {
    const t = await tenant();
    const id = await t.fact("ds", { invalidAt: "2025-05-05T00:00:00.000Z" });
    expect(await json(await t.remove("ds", id), 404)).toEqual({ error: "Fact not found" });
    expect((await row(id))?.invalid_at).toBe("2025-05-05T00:00:00.000Z");
  });

  it("answers 404 for an unknown id and for the fact under another dataset", async () => {
    const t = await tenant();
    const id = await t.fact("ds");
    expect(await json(await t.remove("ds", "fct_unknown"), 404)).toEqual({ error: "Fact not found" });
    expect(await json(await t.remove("DS", id), 404)).toEqual({ error: "Fact not found" });
    expect(await json(await t.remove("other", id), 404)).toEqual({ error: "Fact not found" });
    expect((await row(id))?.invalid_at).toBeNull();
    expect(await t.ids("ds")).toEqual([id]);
  });

  it("answers 404 for another project's fact and leaves it live", async () => {
    const theirs = await tenant("theirs");
    const mine = await tenant("mine");
    const id = await theirs.fact("ds");
    expect(await json(await mine.remove("ds", id), 404)).toEqual({ error: "Fact not found" });
    expect((await row(id))?.invalid_at).toBeNull();
    expect(await theirs.ids("ds")).toEqual([id]);
  });

  it("drops the fact from its entity's facts", async () => {
    const t = await tenant();
    const acme = await t.entity("ds", "Acme");
    const a = await t.fact("ds");
    const b = await t.fact("ds");
    await t.link(a, acme);
    await t.link(b, acme);
    expect((await t.remove("ds", b)).status).toBe(200);
    expect((await json<FactList>(await t.entityFacts("ds", "Acme"), 200)).facts.map((f) => f.factId)).toEqual([a]);
    expect(await t.ids("ds", "?entity=acme")).toEqual([a]);
  });
});

describe("GET /datasets/:dataset/entities", () => {
  it("returns every entity of the dataset as {name, type}, ordered by name case-insensitively", async () => {
    const t = await tenant();
    const other = await tenant("other");
    await t.entity("ds", "zeta", "CONCEPT");
    await t.entity("ds", "Acme", "PRODUCT");
    await t.entity("ds", "Acme", "ORG");
    await t.entity("ds", "bob", "PERSON");
    await t.entity("ds", "Berlin", "PLACE");
    await t.entity("ds", "apple", "PRODUCT");
    await t.entity("other-ds", "Hidden");
    await other.entity("ds", "Foreign");
    for (let i = 0; i < 120; i++) await t.entity("big", `entity ${String(i).padStart(3, "0")}`);

    expect(await json(await t.entities("ds"), 200)).toEqual({
      entities: [
        { name: "Acme", type: "ORG" },
        { name: "Acme", type: "PRODUCT" },
        { name: "apple", type: "PRODUCT" },
        { name: "Berlin", type: "PLACE" },
        { name: "bob", type: "PERSON" },
        { name: "zeta", type: "CONCEPT" },
      ],
    });
    // Unpaginated: all of them.
    expect((await json<{ entities: unknown[] }>(await t.entities("big"), 200)).entities).toHaveLength(120);
    expect(await json(await t.entities("nothing-here"), 200)).toEqual({ entities: [] });
    expect(await json(await other.entities("ds"), 200)).toEqual({ entities: [{ name: "Foreign", type: "ORG" }] });
  });

  it("answers 500 Failed to list entities when the read fails", async () => {
    const t = await tenant();
    failNext = /FROM "entities"/;
    expect(await json(await t.entities("a/b c"), 500)).toEqual({ error: "Failed to list entities" });
    expect(failNext).toBeUndefined();
    // Other routes keep the generic message.
    failNext = /FROM "facts"/;
    expect(await json(await t.facts("ds"), 500)).toEqual({ error: "Internal server error" });
    expect(failNext).toBeUndefined();
  });
});

describe("GET /datasets/:dataset/entities/:name/facts", () => {
  it("returns live facts linked to the entity, case-insensitively, across types, each once", async () => {
    const t = await tenant();
    const org = await t.entity("ds", "Acme", "ORG");
    const product = await t.entity("ds", "acme", "PRODUCT");
    const bob = await t.entity("ds", "Bob", "PERSON");
    const works = await t.fact("ds", { predicate: "works_at", object: "Acme", validAt: "2025-01-01T00:00:00.000Z" });
    const uses = await t.fact("ds", { predicate: "uses", object: "acme", validAt: "2025-02-01T00:00:00.000Z" });
    const both = await t.fact("ds", { object: "Acme", validAt: "2024-01-01T00:00:00.000Z" });
    const gone = await t.fact("ds", { invalidAt: "2026-01-01T00:00:00.000Z" });
    const bobs = await t.fact("ds");
    await t.link(works, org);
    await t.link(uses, product);
    await t.link(both, org, product);
    await t.link(gone, org);
    await t.link(bobs, bob);

    const body = await json<{ facts: Fact[] }>(await t.entityFacts("ds", "ACME"), 200);
    expect(Object.keys(body)).toEqual(["facts"]);
    expect(body.facts.map((f) => f.factId)).toEqual([uses, works, both]);
    for (const f of body.facts) {
      expect(Object.keys(f).sort()).toEqual(FACT_KEYS);
      expect(f).toMatchObject({ invalidAt: null, relevanceScore: 1 });
    }
    expect(body.facts[1]).toMatchObject({ predicate: "works_at", object: "Acme", confidence: 0.9 });
  });

  it("answers 200 {facts: []} for an unknown entity, an entity without live facts, and an empty dataset", async () => {
    const t = await tenant();
    const lonely = await t.entity("ds", "Lonely");
    const gone = await t.fact("ds", { invalidAt: "2026-01-01T00:00:00.000Z" });
    await t.link(gone, lonely);
    expect(await json(await t.entityFacts("ds", "Nobody"), 200)).toEqual({ facts: [] });
    expect(await json(await t.entityFacts("ds", "Lonely"), 200)).toEqual({ facts: [] });
    expect(await json(await t.entityFacts("nothing-here", "Lonely"), 200)).toEqual({ facts: [] });
  });
});

describe("percent-encoded names", () => {
  it("round-trips datasets and entity names with reserved and non-ASCII characters", async () => {
    const t = await tenant();
    const dataset = "a/b c?#%&é";
    const cafe = await t.entity(dataset, "Café", "PLACE");
    const slash = await t.entity(dataset, "AC/DC & co", "ORG");
    const f1 = await t.fact(dataset, { object: "Café" });
    const f2 = await t.fact(dataset, { object: "AC/DC" });
    await t.link(f1, cafe);
    await t.link(f2, slash);
    // The same names in a dataset that differs only by the encoded characters.
    await t.fact("a", { object: "elsewhere" });

    expect(await t.ids(dataset)).toEqual([f2, f1]);
    expect(await t.ids(dataset, `?entity=${enc("café")}`)).toEqual([f1]);
    expect(await t.ids(dataset, `?entity=${enc("CAFÉ")}`)).toEqual([f1]);
    expect(await json(await t.entities(dataset), 200)).toEqual({
      entities: [
        { name: "AC/DC & co", type: "ORG" },
        { name: "Café", type: "PLACE" },
      ],
    });
    const byName = async (name: string) =>
      (await json<{ facts: Fact[] }>(await t.entityFacts(dataset, name), 200)).facts.map((f) => f.factId);
    expect(await byName("Café")).toEqual([f1]);
    expect(await byName("café")).toEqual([f1]);
    expect(await byName("ac/dc & CO")).toEqual([f2]);

    expect((await t.remove(dataset, f1)).status).toBe(200);
    expect(await t.ids(dataset)).toEqual([f2]);
    expect(await t.ids("a")).toHaveLength(1);
  });
});

describe("facts belong to the dataset", () => {
  it("outlive the deletion of the thread they came from", async () => {
    const t = await tenant();
    const created = await json<{ threadId: string }>(
      await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } }),
      201,
    );
    const acme = await t.entity("ds", "Acme");
    const id = await t.fact("ds", { episodeId: "epi_of_thread" });
    await t.link(id, acme);
    await svc.deps.db.execute(sql`DELETE FROM threads WHERE id = ${created.threadId}`);
    expect((await svc.request(`/v1/threads/${created.threadId}`, { token: t.key })).status).toBe(404);

    expect(await t.ids("ds")).toEqual([id]);
    expect(await t.ids("ds", "?episodeId=epi_of_thread")).toEqual([id]);
    expect(await json(await t.entities("ds"), 200)).toEqual({ entities: [{ name: "Acme", type: "ORG" }] });
    expect((await json<{ facts: Fact[] }>(await t.entityFacts("ds", "acme"), 200)).facts).toHaveLength(1);
  });
});

describe("tenant isolation", () => {
  it("shows another project nothing of a dataset with the same name, on every route", async () => {
    const theirs = await tenant("theirs");
    const mine = await tenant("mine");
    const acme = await theirs.entity("shared", "Acme");
    const id = await theirs.fact("shared", { episodeId: "epi_theirs" });
    await theirs.link(id, acme);

    expect(await mine.list("shared")).toEqual({ facts: [], total: 0 });
    expect(await mine.list("shared", "?includeInvalidated=true&entity=Acme&episodeId=epi_theirs")).toEqual({
      facts: [],
      total: 0,
    });
    expect(await json(await mine.entities("shared"), 200)).toEqual({ entities: [] });
    expect(await json(await mine.entityFacts("shared", "Acme"), 200)).toEqual({ facts: [] });
    expect((await mine.remove("shared", id)).status).toBe(404);

    // The owner still sees everything.
    expect(await theirs.ids("shared", "?entity=acme")).toEqual([id]);
    expect(await json(await theirs.entities("shared"), 200)).toEqual({ entities: [{ name: "Acme", type: "ORG" }] });
  });

  it("links to another project's entity of the same name do not leak into the entity filter", async () => {
    const theirs = await tenant("theirs");
    const mine = await tenant("mine");
    const theirAcme = await theirs.entity("shared", "Acme");
    await mine.entity("shared", "Acme");
    const myFact = await mine.fact("shared");
    // Only possible by hand; the entity's project is checked anyway.
    await mine.link(myFact, theirAcme);
    expect(await mine.list("shared", "?entity=acme")).toEqual({ facts: [], total: 0 });
    expect(await json(await mine.entityFacts("shared", "acme"), 200)).toEqual({ facts: [] });
  });
});

describe("the OpenAPI document", () => {
  it("documents the four routes with the API key, their parameters and error responses", async () => {
    const doc = (await (await svc.request("/openapi.json")).json()) as {
      paths: Record<
        string,
        Record<
          string,
          {
            security: Record<string, string[]>[];
            parameters: { name: string; in: string; description?: string; schema: { description?: string } }[];
            responses: Record<string, unknown>;
          }
        >
      >;
    };
    const expected: [string, string, string[], string[]][] = [
      [
        "/datasets/{dataset}/facts",
        "get",
        ["dataset", "limit", "episodeId", "entity", "includeInvalidated"],
        // 404: a path holding NUL (functions/app.ts, documentMiddlewareRefusals).
        ["200", "400", "401", "404"],
      ],
      // A write: the optional Idempotency-Key header, and its 409 and 422 (functions/idempotency.ts).
      [
        "/datasets/{dataset}/facts/{factId}",
        "delete",
        ["dataset", "factId", "Idempotency-Key"],
        ["200", "400", "401", "404", "409", "422"],
      ],
      ["/datasets/{dataset}/entities", "get", ["dataset"], ["200", "400", "401", "404", "500"]],
      ["/datasets/{dataset}/entities/{name}/facts", "get", ["dataset", "name"], ["200", "400", "401", "404"]],
    ];
    for (const [path, method, params, statuses] of expected) {
      const op = doc.paths[`${S}${path}`]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op.security).toEqual([{ apiKey: [] }]);
      expect(op.parameters.map((p) => p.name).sort()).toEqual([...params].sort());
      for (const p of op.parameters) expect(p.description ?? p.schema.description, p.name).toBeTruthy();
      expect(Object.keys(op.responses).sort()).toEqual(statuses);
    }
  });
});

// -------------------------------------------------------------------------------------------------

async function measured(t: Tenant, path: string, init: Parameters<TestService["request"]>[1] = {}) {
  statements.length = 0;
  recording = true;
  try {
    const res = await svc.request(path, { ...init, token: t.key });
    const body = await res.text();
    return { status: res.status, body, statements: [...statements] };
  } finally {
    recording = false;
  }
}

interface Fixture extends Tenant {
  live: string;
  gone: string;
}

async function fixture(): Promise<Fixture> {
  const t = await tenant("rt");
  const acme = await t.entity("rt ds", "Acme");
  const live = await t.fact("rt ds");
  const gone = await t.fact("rt ds", { invalidAt: "2026-01-01T00:00:00.000Z" });
  await t.link(live, acme);
  await t.link(gone, acme);
  return { ...t, live, gone };
}

type Case = [name: string, status: number, build: (f: Fixture) => [string, Parameters<TestService["request"]>[1]]];
const D = `${S}/datasets/${enc("rt ds")}`;
const cases: Case[] = [
  ["list facts", 200, () => [`${D}/facts`, {}]],
  [
    "list facts with every filter",
    200,
    () => [`${D}/facts?limit=5&episodeId=epi_default&entity=acme&includeInvalidated=1`, {}],
  ],
  ["list facts, bad limit", 400, () => [`${D}/facts?limit=101`, {}]],
  ["invalidate fact", 200, (f) => [`${D}/facts/${f.live}`, { method: "DELETE" }]],
  ["invalidate invalidated fact", 404, (f) => [`${D}/facts/${f.gone}`, { method: "DELETE" }]],
  ["invalidate unknown fact", 404, () => [`${D}/facts/fct_unknown`, { method: "DELETE" }]],
  ["list entities", 200, () => [`${D}/entities`, {}]],
  ["entity facts", 200, () => [`${D}/entities/ACME/facts`, {}]],
  ["unknown entity facts", 200, () => [`${D}/entities/nobody/facts`, {}]],
];

describe("round trips per semantic /v1 request", () => {
  it.each(cases)(`%s (status %i) sends at most ${BUDGET} statements`, async (_name, status, build) => {
    const f = await fixture();
    const [path, init] = build(f);
    const m = await measured(f, path, init);
    expect(m.status, m.body).toBe(status);
    expect(m.statements.length, m.statements.join("\n---\n")).toBeLessThanOrEqual(BUDGET);
    expect(m.statements[0]).toMatch(/api_keys/);
  });
});

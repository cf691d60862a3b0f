import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { newId } from "../../lib/ids";
import { runDueJobs } from "../../lib/jobs/runner";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import type { Tenant } from "../helpers/episodic-fixtures";
import { fakeEmbedding } from "../helpers/fake-openai";
import { fact, factText, judge, judgedPairs, useSemanticService } from "../helpers/semantic-fixtures";

/**
 * The write-time rules for facts and entities (spec: "What the service does" 5, settings 8 and
 * 10): dedup at factDedupThreshold, the contradiction band [contradictionBandMin,
 * factDedupThreshold) judged in one call, low-confidence facts never invalidating, and entity
 * resolution. The fake embeddings are deterministic, so each test reads the database's own
 * similarity of its texts and puts the threshold exactly where the rule is decided.
 */
const { h, tenant, extract, facts, factBy, entities, links, semanticState, setSemantic, calls, similarity } =
  useSemanticService();

const LISBON = factText("lives_in", "Lisbon");
const LISBON_PT = factText("lives_in", "Lisbon Portugal");

/** A tenant whose dataset holds the live fact "user lives_in Lisbon". */
async function withLisbon() {
  const t = await tenant();
  const seeded = await extract(t, ["I live in Lisbon", "ok"], {
    facts: [fact("lives_in", "Lisbon", "I live in Lisbon")],
    entities: [],
  });
  return { t, seeded };
}

/** Says "I live in Lisbon, Portugal" in a new episode and extracts "lives_in Lisbon Portugal". */
const restate = (t: Tenant, more: Parameters<typeof fact>[3] = {}) =>
  extract(t, ["I live in Lisbon Portugal", "ok"], {
    facts: [fact("lives_in", "Lisbon Portugal", "I live in Lisbon Portugal", more)],
    entities: [],
  });

const state = (f: { predicate: string; object: string; invalidAt: string | null }) =>
  `${f.predicate} ${f.object}: ${f.invalidAt === null ? "live" : "invalidated"}`;

describe("dedup at factDedupThreshold", () => {
  it("drops a new fact exactly at the threshold", async () => {
    const sim = await similarity(LISBON, LISBON_PT);
    const { t } = await withLisbon();
    await setSemantic(t, { factDedupThreshold: sim, contradictionBandMin: sim - 0.2 });
    const before = await facts(t);
    const { episodeId } = await restate(t);
    expect(await facts(t)).toEqual(before);
    expect(calls().judge).toBe(0);
    expect((await semanticState(episodeId)).semanticStatus).toBe("completed");
  });

  it("keeps a new fact just under it, and judges it when it is in the band (band floor inclusive)", async () => {
    const sim = await similarity(LISBON, LISBON_PT);
    const { t } = await withLisbon();
    const threshold = sim + 1e-9;
    expect(sim).toBeLessThan(threshold);
    await setSemantic(t, { factDedupThreshold: threshold, contradictionBandMin: sim });
    h.fake.onStructured(
      "contradiction_judgement",
      judge(() => false),
    );
    await restate(t);
    expect((await facts(t)).map(state)).toEqual(["lives_in Lisbon: live", "lives_in Lisbon Portugal: live"]);
    expect(h.fake.chatCalls("contradiction_judgement")).toHaveLength(1);
    expect(judgedPairs(h.fake.chatCalls("contradiction_judgement")[0])).toEqual([
      { pair: 1, old: LISBON, new: LISBON_PT },
    ]);
  });

  it("keeps a new fact just under the band without judging it", async () => {
    const sim = await similarity(LISBON, LISBON_PT);
    const { t } = await withLisbon();
    await setSemantic(t, { factDedupThreshold: 0.99, contradictionBandMin: sim + 1e-9 });
    await restate(t);
    expect((await facts(t)).map(state)).toEqual(["lives_in Lisbon: live", "lives_in Lisbon Portugal: live"]);
    expect(calls().judge).toBe(0);
  });

  it("keeps duplicates within one extraction once (identical, or at the threshold)", async () => {
    const sim = await similarity(LISBON, LISBON_PT);
    const lines = ["I live in Lisbon", "ok", "Yes I live in Lisbon Portugal", "ok"];
    const answer = {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon"),
        fact("lives_in", "Lisbon", "Yes I live in Lisbon"),
        fact("Lives_In", " lisbon ", "I live in Lisbon"),
        fact("lives_in", "Lisbon Portugal", "I live in Lisbon Portugal"),
      ],
      entities: [],
    };
    const at = await tenant();
    await setSemantic(at, { factDedupThreshold: sim, contradictionBandMin: 0.1 });
    await extract(at, lines, answer);
    expect((await facts(at)).map((f) => `${f.predicate} ${f.object} | ${f.sourceQuote}`)).toEqual([
      "lives_in Lisbon | I live in Lisbon",
    ]);

    const under = await tenant();
    await setSemantic(under, { factDedupThreshold: sim + 1e-9, contradictionBandMin: 0.1 });
    await extract(under, lines, answer);
    expect((await facts(under)).map(state)).toEqual(["lives_in Lisbon: live", "lives_in Lisbon Portugal: live"]);
    // Facts of one extraction are not judged against each other.
    expect(calls().judge).toBe(0);
  });

  it("compares with live facts of the same dataset only", async () => {
    const { t } = await withLisbon();
    // The same statement in another dataset is no duplicate.
    await extract(
      t,
      ["I live in Lisbon", "ok"],
      { facts: [fact("lives_in", "Lisbon", "I live in Lisbon")], entities: [] },
      { dataset: "other" },
    );
    // Neither is a deleted (invalidated) fact: stating it again makes a new live fact.
    const [old] = await facts(t);
    const res = await t.get(`/v1/memory/semantic/datasets/ds/facts/${old.id}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    await extract(t, ["I still live in Lisbon", "ok"], {
      facts: [fact("lives_in", "Lisbon", "I still live in Lisbon")],
      entities: [],
    });
    const rows = await facts(t);
    expect(rows.map((f) => `${f.dataset} ${state(f)}`)).toEqual([
      "ds lives_in Lisbon: invalidated",
      "other lives_in Lisbon: live",
      "ds lives_in Lisbon: live",
    ]);
    expect(calls().judge).toBe(0);
  });
});

describe("contradictions in the band [contradictionBandMin, factDedupThreshold)", () => {
  const PARIS = factText("lives_in", "Paris");
  const GLOBEX = factText("works_at", "Globex");
  const JAZZ = factText("likes", "jazz");
  const NEAR_LISBON = factText("lives_near", "Lisbon");
  const INITECH = factText("works_for", "Initech");

  /** Old facts Paris, Globex, jazz; the band floor the lower of Paris/near Lisbon and Globex/Initech. */
  async function withOldFacts() {
    const t = await tenant();
    const band = Math.min(await similarity(PARIS, NEAR_LISBON), await similarity(GLOBEX, INITECH));
    const outside = [
      [PARIS, INITECH],
      [GLOBEX, NEAR_LISBON],
      [JAZZ, NEAR_LISBON],
      [JAZZ, INITECH],
    ];
    for (const [a, b] of outside) expect(await similarity(a, b), `${a} / ${b}`).toBeLessThan(band);
    await setSemantic(t, { contradictionBandMin: band, factDedupThreshold: 0.95 });
    const seeded = await extract(t, ["I lived in Paris since May 2020", "ok", "I work at Globex and like jazz", "ok"], {
      facts: [
        fact("lives_in", "Paris", "I lived in Paris since May 2020", { validAt: "2020-05-01" }),
        fact("works_at", "Globex", "I work at Globex"),
        fact("likes", "jazz", "like jazz"),
      ],
      entities: [],
    });
    return { t, seeded };
  }

  it("judges every band pair of an episode in one call, even with different predicates", async () => {
    const { t } = await withOldFacts();
    const before = await facts(t);
    h.fake.onStructured(
      "contradiction_judgement",
      judge((old) => old === PARIS),
    );
    h.clock.advance(60_000);
    const { said } = await extract(t, ["I moved near Lisbon in September", "ok", "I now work for Initech", "ok"], {
      facts: [
        fact("lives_near", "Lisbon", "I moved near Lisbon in September", { validAt: "2025-09-01T00:00:00Z" }),
        fact("works_for", "Initech", "I now work for Initech"),
      ],
      entities: [],
    });
    const now = h.clock.now().toISOString();
    const judged = h.fake.chatCalls("contradiction_judgement");
    expect(judged).toHaveLength(1);
    expect(judgedPairs(judged[0])).toEqual([
      { pair: 1, old: PARIS, new: NEAR_LISBON },
      { pair: 2, old: GLOBEX, new: INITECH },
    ]);

    // Contradicted: invalidated now, valid until the new fact's validAt. Compatible: untouched.
    const paris = await factBy(t, "lives_in", "Paris");
    expect(paris).toEqual({
      ...before.find((f) => f.object === "Paris"),
      invalidAt: now,
      validUntil: "2025-09-01T00:00:00.000Z",
    });
    expect(await factBy(t, "works_at", "Globex")).toEqual(before.find((f) => f.object === "Globex"));
    expect(await factBy(t, "likes", "jazz")).toEqual(before.find((f) => f.object === "jazz"));
    expect(await factBy(t, "works_for", "Initech")).toMatchObject({
      validAt: said[2].createdAt,
      invalidAt: null,
      validUntil: null,
    });

    // The API leaves the invalidated fact out unless asked.
    const live = (await (await t.get("/v1/memory/semantic/datasets/ds/facts")).json()) as {
      facts: { object: string }[];
    };
    expect(live.facts.map((f) => f.object).sort()).toEqual(["Globex", "Initech", "Lisbon", "jazz"]);
    const all = (await (await t.get("/v1/memory/semantic/datasets/ds/facts?includeInvalidated=true")).json()) as {
      facts: { object: string; invalidAt: string | null; validUntil: string | null }[];
    };
    expect(all.facts.find((f) => f.object === "Paris")).toMatchObject({
      invalidAt: now,
      validUntil: "2025-09-01T00:00:00.000Z",
    });
  });

  it("a fact under retrievalMinConfidence is neither judged nor invalidates", async () => {
    const { t } = await withOldFacts();
    h.fake.onStructured(
      "contradiction_judgement",
      judge(() => true),
    );
    // Only candidate is low-confidence: no judge call at all.
    await extract(t, ["maybe I moved near Lisbon", "ok"], {
      facts: [fact("lives_near", "Lisbon", "maybe I moved near Lisbon", { confidence: 0.49 })],
      entities: [],
    });
    expect(calls().judge).toBe(0);
    expect((await factBy(t, "lives_in", "Paris")).invalidAt).toBeNull();
    expect(await factBy(t, "lives_near", "Lisbon")).toMatchObject({ confidence: 0.49, invalidAt: null });

    // With a confident fact in the same episode, only the confident one's pair is judged.
    await setSemantic(t, { retrievalMinConfidence: 0.6 });
    await extract(t, ["I work for Initech", "ok", "I think I live near Lisbon", "ok"], {
      facts: [
        fact("works_for", "Initech", "I work for Initech", { confidence: 0.6 }),
        fact("lives_near", "Lisbon city", "I think I live near Lisbon", { confidence: 0.59 }),
      ],
      entities: [],
    });
    const judged = h.fake.chatCalls("contradiction_judgement");
    expect(judged).toHaveLength(1);
    expect(judgedPairs(judged[0]).filter((p) => p.new !== INITECH)).toEqual([]);
    expect(judgedPairs(judged[0])).toContainEqual({ pair: 1, old: GLOBEX, new: INITECH });
    expect((await facts(t)).map(state).sort()).toEqual([
      "likes jazz: live",
      "lives_in Paris: live",
      "lives_near Lisbon city: live",
      "lives_near Lisbon: live",
      "works_at Globex: invalidated",
      "works_for Initech: live",
    ]);
  });

  it("never ends an old fact before it began", async () => {
    const { t } = await withOldFacts();
    h.fake.onStructured(
      "contradiction_judgement",
      judge(() => true),
    );
    // Stated as true from 2019, before Paris (2020-05-01).
    await extract(t, ["I have lived near Lisbon since 2019", "ok"], {
      facts: [fact("lives_near", "Lisbon", "I have lived near Lisbon since 2019", { validAt: "2019-01-01" })],
      entities: [],
    });
    expect(await factBy(t, "lives_in", "Paris")).toMatchObject({
      validAt: "2020-05-01T00:00:00.000Z",
      validUntil: "2020-05-01T00:00:00.000Z",
      invalidAt: h.clock.now().toISOString(),
    });
  });

  it("does not end an old fact by a new fact whose words were forgotten meanwhile, and reports the facts it ended", async () => {
    const { t } = await withOldFacts();
    // A thread saying two things; its first extraction keeps only the cat.
    const { threadId } = await extract(t, ["I moved near Lisbon and I have a cat", "ok"], {
      facts: [fact("has_pet", "cat", "I have a cat")],
      entities: [],
    });
    const cat = await factBy(t, "has_pet", "cat");
    // Ended again: while the judge answers, the user forgets the cat, whose words say Lisbon too.
    h.fake.onStructured("fact_extraction", () => ({
      facts: [fact("lives_near", "Lisbon", "I moved near Lisbon")],
      entities: [],
    }));
    h.fake.onStructured("contradiction_judgement", async (request) => {
      const res = await t.get(`/v1/memory/semantic/datasets/ds/facts/${cat.id}`, { method: "DELETE" });
      expect(res.status).toBe(200);
      return judge((old) => old === PARIS)(request);
    });
    h.clock.advance(60_000);
    const { episodeId } = await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect(calls().judge).toBe(1);
    // Lisbon was not written (its words are forgotten), so Paris still holds.
    expect((await factBy(t, "lives_in", "Paris")).invalidAt).toBeNull();
    expect((await facts(t)).map(state)).not.toContain("lives_near Lisbon: live");
    expect((await t.episode(episodeId as string)).extractionReport).toMatchObject({ invalidated: 0 });
  });
});

describe("entity resolution", () => {
  it("merges two new entities of one type above entityResolutionThreshold in one answer, as across two", async () => {
    const t = await tenant();
    await setSemantic(t, { entityResolutionThreshold: (await similarity("Acme Corp", "Acme Corporation")) - 1e-6 });
    await extract(t, ["I work at Acme Corp, also called Acme Corporation", "ok"], {
      facts: [fact("works_at", "Acme Corporation", "I work at Acme Corp", { objectIsEntity: true })],
      entities: [
        { name: "Acme Corp", type: "ORG" },
        { name: "Acme Corporation", type: "ORG" },
      ],
    });
    expect((await entities(t)).map((e) => `${e.name} (${e.type})`)).toEqual(["Acme Corp (ORG)"]);
    expect((await links(t)).map((l) => l.link)).toEqual(["works_at Acme Corporation -> Acme Corp (ORG)"]);
  });

  it("links a fact naming one name of two types in one answer to both entities", async () => {
    const t = await tenant();
    await extract(t, ["I work at Apple and I own an Apple", "ok"], {
      facts: [fact("works_at", "Apple", "I work at Apple", { objectIsEntity: true })],
      entities: [
        { name: "Apple", type: "ORG" },
        { name: "Apple", type: "PRODUCT" },
      ],
    });
    expect((await entities(t)).map((e) => e.type).sort()).toEqual(["ORG", "PRODUCT"]);
    expect((await links(t)).map((l) => l.link).sort()).toEqual([
      "works_at Apple -> Apple (ORG)",
      "works_at Apple -> Apple (PRODUCT)",
    ]);
  });

  /** A tenant with the entity Acme Corp (ORG), linked from "works_at Acme Corp". */
  async function withAcme(threshold: number) {
    const t = await tenant();
    await setSemantic(t, { entityResolutionThreshold: threshold });
    await extract(t, ["I work at Acme Corp", "ok"], {
      facts: [fact("works_at", "Acme Corp", "I work at Acme Corp", { objectIsEntity: true })],
      entities: [{ name: "Acme Corp", type: "ORG" }],
    });
    const [acme] = await entities(t);
    expect(acme).toMatchObject({ name: "Acme Corp", type: "ORG" });
    return { t, acme };
  }

  const mention = (t: Tenant, name: string, type: string) =>
    extract(t, [`${name} pays me well`, "ok"], {
      facts: [fact("paid_by", name, `${name} pays me well`, { objectIsEntity: true })],
      entities: [{ name, type }],
    });

  it("the same name (case-insensitive) and type merges, whatever the threshold", async () => {
    const { t, acme } = await withAcme(1);
    await mention(t, "ACME corp", "ORG");
    expect(await entities(t)).toEqual([acme]);
    expect((await links(t)).map((l) => [l.link, l.entity_id])).toEqual([
      ["paid_by ACME corp -> Acme Corp (ORG)", acme.id],
      ["works_at Acme Corp -> Acme Corp (ORG)", acme.id],
    ]);
  });

  it("a same-type entity above entityResolutionThreshold merges; at it, it does not", async () => {
    const sim = await similarity("Acme Corp", "Acme Corporation");
    const above = await withAcme(sim - 1e-9);
    await mention(above.t, "Acme Corporation", "ORG");
    expect(await entities(above.t)).toEqual([above.acme]);
    expect((await links(above.t)).find((l) => l.link.startsWith("paid_by"))?.entity_id).toBe(above.acme.id);

    const at = await withAcme(sim);
    await mention(at.t, "Acme Corporation", "ORG");
    const rows = await entities(at.t);
    expect(rows.map((e) => `${e.name} (${e.type})`)).toEqual(["Acme Corp (ORG)", "Acme Corporation (ORG)"]);
    expect((await links(at.t)).map((l) => l.link)).toEqual([
      "paid_by Acme Corporation -> Acme Corporation (ORG)",
      "works_at Acme Corp -> Acme Corp (ORG)",
    ]);
  });

  it("a different type never merges, even with the same name", async () => {
    const { t, acme } = await withAcme(0);
    await mention(t, "Acme Corp", "PRODUCT");
    const rows = await entities(t);
    expect(rows.map((e) => `${e.name} (${e.type})`)).toEqual(["Acme Corp (ORG)", "Acme Corp (PRODUCT)"]);
    const product = rows.find((e) => e.type === "PRODUCT");
    expect(product?.id).not.toBe(acme.id);
    expect((await links(t)).filter((l) => l.link.startsWith("paid_by")).map((l) => l.entity_id)).toEqual([product?.id]);
  });

  it("the same name merges into an entity whatever its id (written by another path), at threshold 1", async () => {
    const t = await tenant();
    await setSemantic(t, { entityResolutionThreshold: 1 });
    const id = newId("ent");
    const vector = `[${fakeEmbedding("ACME Corp", TEST_EMBEDDING_DIMENSIONS).join(",")}]`;
    await h.svc.deps.db.execute(
      sql`INSERT INTO entities (id, project_id, dataset, name, type, embedding) VALUES (${id}, ${t.projectId}, 'ds', 'ACME Corp', 'ORG', ${vector}::vector)`,
    );
    const { episodeId } = await mention(t, "Acme corp", "ORG");
    expect((await semanticState(episodeId)).semanticStatus).toBe("completed");
    expect((await entities(t)).map((e) => e.id)).toEqual([id]);
    expect((await links(t)).map((l) => l.entity_id)).toEqual([id]);
  });

  it("an existing entity with no embedding still absorbs its name", async () => {
    const t = await tenant();
    const id = newId("ent");
    await h.svc.deps.db.execute(
      sql`INSERT INTO entities (id, project_id, dataset, name, type) VALUES (${id}, ${t.projectId}, 'ds', 'Lisbon', 'PLACE')`,
    );
    const { episodeId } = await extract(t, ["I live in lisbon", "ok"], {
      facts: [fact("lives_in", "lisbon", "I live in lisbon", { objectIsEntity: true })],
      entities: [{ name: "lisbon", type: "PLACE" }],
    });
    expect((await semanticState(episodeId)).semanticStatus).toBe("completed");
    expect((await entities(t)).map((e) => e.id)).toEqual([id]);
    expect((await links(t)).map((l) => l.entity_id)).toEqual([id]);
  });

  it("entities repeated within one extraction make one row", async () => {
    const t = await tenant();
    await extract(t, ["I live in Lisbon and love Lisbon", "ok"], {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon", { objectIsEntity: true }),
        fact("loves", "lisbon", "love Lisbon", { objectIsEntity: true }),
      ],
      entities: [
        { name: "Lisbon", type: "PLACE" },
        { name: " LISBON ", type: "PLACE" },
      ],
    });
    const rows = await entities(t);
    expect(rows.map((e) => `${e.name} (${e.type})`)).toEqual(["Lisbon (PLACE)"]);
    expect((await links(t)).map((l) => l.link)).toEqual([
      "lives_in Lisbon -> Lisbon (PLACE)",
      "loves lisbon -> Lisbon (PLACE)",
    ]);
  });
});

describe("the user's names", () => {
  it("are not taken from an act named like a name: 'I called Mom' keeps Mom's facts Mom's", async () => {
    const t = await tenant();
    await extract(t, ["I called Mom yesterday. Mom lives in Porto.", "ok"], {
      facts: [
        fact("called", "Mom", "I called Mom yesterday", { subject: "I" }),
        fact("lives_in", "Porto", "Mom lives in Porto", { subject: "Mom" }),
      ],
      entities: [],
    });
    expect((await facts(t)).map((f) => `${f.subject} ${f.predicate} ${f.object}`)).toEqual(["user called Mom"]);
    // Nor later: the stored act names no one either.
    h.clock.advance(60_000);
    await extract(t, ["Mom works at Globex.", "ok"], {
      facts: [fact("works_at", "Globex", "Mom works at Globex", { subject: "Mom" })],
      entities: [],
    });
    expect((await facts(t)).map((f) => f.predicate)).not.toContain("works_at");
  });

  it("come from a name fact only when its quote is the user's words", async () => {
    const t = await tenant();
    await extract(t, ["Ana lives in Porto.", "ok"], {
      facts: [
        fact("name", "Ana", "my name is Ana", { subject: "I" }),
        fact("lives_in", "Porto", "Ana lives in Porto", { subject: "Ana" }),
      ],
      entities: [],
    });
    expect(await facts(t)).toEqual([]);
  });
});

describe("a forgotten fact", () => {
  it("is not extracted again when the thread is ended again over the same messages; new words are", async () => {
    const t = await tenant();
    const lisbon = { facts: [fact("lives_in", "Lisbon", "I live in Lisbon")], entities: [] };
    const { threadId } = await extract(t, ["I live in Lisbon", "Nice."], lisbon);
    const [forgotten] = await facts(t);
    const res = await t.get(`/v1/memory/semantic/datasets/${forgotten.dataset}/facts/${forgotten.id}`, {
      method: "DELETE",
    });
    expect(res.status).toBe(200);
    // The app ends the conversation again: another episode of the whole thread (the spec).
    h.clock.advance(60_000);
    h.fake.onStructured("fact_extraction", () => lisbon);
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect((await facts(t)).filter((f) => f.invalidAt === null)).toEqual([]);
    // The model was not even asked: no word of the user's is left to extract from.
    expect(calls().extraction).toBe(1);
    // New words in the thread are read, without the forgotten ones.
    await t.say(threadId, "I work as a nurse");
    h.clock.advance(60_000);
    h.fake.onStructured("fact_extraction", () => ({
      facts: [fact("works_as", "nurse", "I work as a nurse")],
      entities: [],
    }));
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect((await facts(t)).filter((f) => f.invalidAt === null).map((f) => f.predicate)).toEqual(["works_as"]);
    const sent = h.fake.chatCalls("fact_extraction").at(-1)?.messages.at(-1)?.content ?? "";
    expect(sent).toContain("I work as a nurse");
    expect(sent).not.toContain("Lisbon");
  });

  it("stays forgotten when it is forgotten while another extraction of the same words waits for the model", async () => {
    const t = await tenant();
    const lisbon = { facts: [fact("lives_in", "Lisbon", "I live in Lisbon")], entities: [] };
    const { threadId } = await extract(t, ["I live in Lisbon", "Nice."], lisbon);
    const [known] = await facts(t);
    // The app ends the thread again (an episode of the same words), and the user asks to forget
    // the fact while that episode's extraction waits for the model.
    h.clock.advance(60_000);
    h.fake.onStructured("fact_extraction", async () => {
      const res = await t.get(`/v1/memory/semantic/datasets/${known.dataset}/facts/${known.id}`, { method: "DELETE" });
      expect(res.status).toBe(200);
      return lisbon;
    });
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect(calls().extraction).toBe(2);
    expect((await facts(t)).filter((f) => f.invalidAt === null)).toEqual([]);
    // Words the forget did not touch are still written from such a run.
    await t.say(threadId, "I work as a nurse");
    h.clock.advance(60_000);
    h.fake.onStructured("fact_extraction", () => ({
      facts: [fact("works_as", "nurse", "I work as a nurse")],
      entities: [],
    }));
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect((await facts(t)).filter((f) => f.invalidAt === null).map((f) => f.predicate)).toEqual(["works_as"]);
  });
});

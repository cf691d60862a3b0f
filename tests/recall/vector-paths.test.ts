import { randomUUID } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { vectorIndexName } from "../../lib/db/vector-indexes";
import { VECTOR_SCAN_MAX } from "../../lib/db/vectors";
import { type Retrieval, recallSql, retrieve } from "../../lib/recall/retrieve";
import { existingEntitySql, nearestLiveFacts } from "../../lib/semantic/extract";
import { fakeEmbedding } from "../helpers/fake-openai";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Recall's vector search takes the path the dataset's own size calls for, not the one a plan
 * guessed from the table's statistics: a plan is made once for every dataset (a generic plan on
 * the embedded database), so in a table of many small datasets it guessed every dataset small and
 * read a large one's facts whole through the dataset's B-tree (50 ms for 20,000 facts beside
 * 2,000 datasets of 10, against 6 alone: bench/RESULTS.md). Shown here with statistics that say
 * every dataset is a few facts, made before the large one was written.
 */
let svc: TestService;
let dims: number;
beforeAll(async () => {
  svc = await createTestService();
  dims = svc.deps.config.openai.embeddingDimensions;
});
afterAll(async () => {
  await svc?.close();
});

/** `count` facts of `projectId`, fact g in dataset `datasetOf(g)`, about "boat g" but the first, about a lighthouse. */
async function insertFacts(projectId: string, count: number, datasetOf: (g: number) => string, into = svc) {
  const rows = Array.from({ length: count }, (_, g) => {
    const object = g === 0 ? "a lighthouse" : `boat ${g}`;
    return { g, d: datasetOf(g), object, v: `[${fakeEmbedding(`user owns ${object}`, dims).join(",")}]` };
  });
  const prefix = `fct_vp_${randomUUID().slice(0, 8)}_`;
  await into.deps.db.execute(sql`
    INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
    SELECT ${prefix} || x.g, ${projectId}, x.d, 'user', 'owns', x.object, 0.9, 'I said so', now() - make_interval(secs => x.g),
      x.v::halfvec
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(g int, d text, object text, v text)`);
}

/**
 * `count` entities of `projectId` in `dataset`, "club g" (embedded as "club g"), and one named
 * "Harbour Club" (embedded as "harbour club") that the dataset's newest fact, "a lighthouse", is about.
 */
async function insertEntities(projectId: string, dataset: string, count: number) {
  const rows = Array.from({ length: count }, (_, g) => ({ g, v: `[${fakeEmbedding(`club ${g}`, dims).join(",")}]` }));
  const prefix = `ent_vp_${randomUUID().slice(0, 8)}_`;
  await svc.deps.db.execute(sql`
    INSERT INTO entities (id, project_id, dataset, name, type, embedding)
    SELECT ${prefix} || x.g, ${projectId}, ${dataset}, 'club ' || x.g, 'organization', x.v::halfvec
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(g int, v text)`);
  await svc.deps.db.execute(sql`
    WITH e AS (INSERT INTO entities (id, project_id, dataset, name, type, embedding)
      VALUES (${`${prefix}harbour`}, ${projectId}, ${dataset}, 'Harbour Club', 'organization',
        ${`[${fakeEmbedding("harbour club", dims).join(",")}]`}::halfvec) RETURNING id)
    INSERT INTO fact_entities (fact_id, entity_id)
    SELECT f.id, e.id FROM e, (SELECT id FROM facts WHERE project_id = ${projectId} AND dataset = ${dataset}
      AND object = 'a lighthouse') f`);
}

/** Entity rows each scan of the recall statement read (rows it returned and rows its filter removed). */
async function entityScans(statement: SQL) {
  const plan = await svc.deps.db.transaction(async (tx) => {
    await tx.execute(sql`SET LOCAL enable_seqscan = off`);
    return planOf(await tx.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`)).Plan;
  });
  return planNodes(plan)
    .filter((n) => (n["Actual Loops"] ?? 0) > 0 && n["Relation Name"] === "entities")
    .map((n) => ({
      index: n["Index Name"],
      read: ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 0),
    }));
}

/** Hybrid recall of facts in `dataset` for "lighthouse". */
const lighthouseRecall = (projectId: string, dataset: string): Retrieval => ({
  projectId,
  dataset,
  mode: "hybrid",
  query: "lighthouse",
  vector: fakeEmbedding("lighthouse", dims),
  facts: true,
  episodes: false,
});

describe("the facts' vector search by dataset size", { timeout: 120_000 }, () => {
  it("a large dataset searches the HNSW index even where the statistics say every dataset is small", async () => {
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 1_000, (g) => `small-${g % 200}`);
    await svc.deps.db.execute(sql`ANALYZE facts`);
    await insertFacts(t.projectId, VECTOR_SCAN_MAX + 100, () => "large");
    const r = lighthouseRecall(t.projectId, "large");
    const plan = planOf(await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(svc.deps, r)}`)).Plan;
    const ran = planNodes(plan).filter((n) => (n["Actual Loops"] ?? 0) > 0 && n["Relation Name"] === "facts");
    const factRowsRead = ran.reduce(
      (sum, n) => sum + ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 0),
      0,
    );
    expect(ran.map((n) => n["Index Name"])).toContain(vectorIndexName("facts", dims));
    // The search reads its candidates, not the dataset's 2,100 facts.
    expect(factRowsRead).toBeLessThan(VECTOR_SCAN_MAX / 2);
    expect((await retrieve(svc.deps, r)).facts?.[0]?.object).toBe("a lighthouse");
  });

  it(`a dataset of at most ${VECTOR_SCAN_MAX} facts finds its nearest by exact distance over its own rows`, async () => {
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 300, () => "crowd");
    await insertFacts(t.projectId, 40, () => "own");
    const r = lighthouseRecall(t.projectId, "own");
    const plan = await svc.deps.db.transaction(async (tx) => {
      await tx.execute(sql`SET LOCAL enable_seqscan = off`);
      return planOf(await tx.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(svc.deps, r)}`)).Plan;
    });
    const ran = planNodes(plan).filter((n) => (n["Actual Loops"] ?? 0) > 0 && n["Relation Name"] === "facts");
    expect(ran.map((n) => n["Index Name"])).not.toContain(vectorIndexName("facts", dims));
    // No scan reads more than the dataset's own 40 facts (the other's 300 are never touched).
    for (const n of ran) expect((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)).toBeLessThanOrEqual(40);
    const found = await retrieve(svc.deps, r);
    expect(found.facts?.[0]?.object).toBe("a lighthouse");
    const q = fakeEmbedding("lighthouse", dims);
    const v = fakeEmbedding("user owns a lighthouse", dims);
    const cosine = q.reduce((s, x, i) => s + x * v[i], 0) / Math.hypot(...q) / Math.hypot(...v);
    expect(found.facts?.[0]?.signals.vector).toBeCloseTo(cosine, 2);
  });

  it(`a dataset of at most ${VECTOR_SCAN_MAX} facts that is most of its table searches the indexes, beside a crowd its own rows`, async () => {
    // A database of its own: the dataset alone in the facts table, then beside another project's.
    const own = await createTestService();
    try {
      const t = await newTenant(own, `vp-${randomUUID().slice(0, 6)}`);
      await insertFacts(t.projectId, 300, () => "alone", own);
      const r = lighthouseRecall(t.projectId, "alone");
      const paths = async () => {
        await own.deps.db.execute(sql`ANALYZE facts`);
        const plan = planOf(await own.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(own.deps, r)}`));
        const ran = planNodes(plan.Plan).filter((n) => (n["Actual Loops"] ?? 0) > 0);
        expect((await retrieve(own.deps, r)).facts?.[0]?.object).toBe("a lighthouse");
        // Extraction's search for a new fact's duplicates takes the same path.
        const twin = `[${fakeEmbedding("user owns a lighthouse", dims).join(",")}]`;
        const episode = { project_id: t.projectId, dataset: "alone" };
        const near = nearestLiveFacts(own.deps, episode, sql`${twin}::halfvec`, sql`f.id, f.object`);
        const extraction = planOf(await own.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${near}`));
        return {
          hnsw: ran.some((n) => n["Index Name"] === vectorIndexName("facts", dims)),
          ownRowsByWord: ran.some((n) => n["Relation Name"] === "facts" && n.Filter?.includes("IS TRUE")),
          extractionHnsw: planNodes(extraction.Plan).some(
            (n) => (n["Actual Loops"] ?? 0) > 0 && n["Index Name"] === vectorIndexName("facts", dims),
          ),
        };
      };
      // 300² > EXACT_SHARE_FACTOR × 300: the index walks a few of its rows, where the exact path
      // reads all 300 (and a word's lookup reads the dataset's rows, not the word's postings).
      expect(await paths()).toEqual({ hnsw: true, ownRowsByWord: false, extractionHnsw: true });
      // Beside 3,000 facts of another tenant, 300² ≤ EXACT_SHARE_FACTOR × 3,300: the index would
      // walk the others' rows to find its own.
      const crowd = await newTenant(own, `vp-${randomUUID().slice(0, 6)}`);
      await insertFacts(crowd.projectId, 3_000, () => "crowd", own);
      expect(await paths()).toEqual({ hnsw: false, ownRowsByWord: true, extractionHnsw: false });
    } finally {
      await own.close();
    }
  });

  it("a large dataset's entities are found by their own keys and the HNSW index, never read whole", async () => {
    // No statistics: the planner then guesses every dataset a few rows (the embedded database before it
    // took its own; any database before a new dataset's growth is sampled).
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 400, (g) => `small-${g % 100}`);
    await insertFacts(t.projectId, VECTOR_SCAN_MAX + 100, () => "large");
    await insertEntities(t.projectId, "large", 3_000);
    const query = "the lighthouse by the harbour club";
    const r = { ...lighthouseRecall(t.projectId, "large"), query, vector: fakeEmbedding(query, dims) };
    const scans = await entityScans(recallSql(svc.deps, r));
    expect(scans.map((n) => n.index)).toContain(vectorIndexName("entities", dims));
    // Each phrase's entities (one, "harbour club") and the nearest few, not 3,001.
    expect(scans.reduce((sum, n) => sum + n.read, 0)).toBeLessThan(100);
    const top = (await retrieve(svc.deps, r)).facts?.[0];
    expect(top?.object).toBe("a lighthouse");
    expect(top?.signals.entity).toBe(1);
  });

  it(`a dataset of at most ${VECTOR_SCAN_MAX} facts finds its nearest entities among its own`, async () => {
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 300, () => "crowd");
    await insertEntities(t.projectId, "crowd", 300);
    await insertFacts(t.projectId, 40, () => "own");
    await insertEntities(t.projectId, "own", 20);
    // Named by no phrase: only the nearest entity ("harbour club", the same vector) anchors the fact.
    const r = {
      ...lighthouseRecall(t.projectId, "own"),
      query: "harbour",
      vector: fakeEmbedding("harbour club", dims),
    };
    const scans = await entityScans(recallSql(svc.deps, r));
    expect(scans.map((n) => n.index)).not.toContain(vectorIndexName("entities", dims));
    // No scan reads more than the dataset's own 21 entities (the other's 301 are never touched).
    for (const n of scans) expect(n.read).toBeLessThanOrEqual(21);
    const top = (await retrieve(svc.deps, r)).facts?.[0];
    expect(top?.object).toBe("a lighthouse");
    expect(top?.signals.entity).toBeCloseTo(1, 2);
  });

  it(`a dataset of at most ${VECTOR_SCAN_MAX} facts but more entities finds its nearest entity among all of them`, async () => {
    // 40 facts naming 2,101 entities: the exact path would score the first 2,001 by type and
    // name, and "Harbour Club", of a type that sorts last, was never among them.
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 40, () => "own");
    await insertEntities(t.projectId, "own", VECTOR_SCAN_MAX + 100);
    await svc.deps.db.execute(sql`UPDATE entities SET type = 'concept'
      WHERE project_id = ${t.projectId} AND name = 'Harbour Club'`);
    const r = {
      ...lighthouseRecall(t.projectId, "own"),
      query: "harbour",
      vector: fakeEmbedding("harbour club", dims),
    };
    const top = (await retrieve(svc.deps, r)).facts?.[0];
    expect(top?.object).toBe("a lighthouse");
    expect(top?.signals.entity).toBeCloseTo(1, 2);
  });

  it("extraction's search for duplicates and contradictions never reads a large dataset whole", async () => {
    // No statistics: the planner then guesses every dataset a few facts.
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 400, (g) => `small-${g % 100}`);
    await insertFacts(t.projectId, VECTOR_SCAN_MAX + 100, () => "large");
    const near = (dataset: string) => {
      const vectors = JSON.stringify(
        [7, 300, 1999].map((g) => `[${fakeEmbedding(`user owns boat ${g}`, dims).join(",")}]`),
      );
      const episode = { project_id: t.projectId, dataset };
      return sql`SELECT q.i, c.object, c.distance
        FROM jsonb_array_elements_text(${vectors}::jsonb) WITH ORDINALITY AS q(v, i)
        CROSS JOIN LATERAL (${nearestLiveFacts(svc.deps, episode, sql`q.v::halfvec`, sql`f.id, f.object`)}) c`;
    };
    const plan = planOf(await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${near("large")}`)).Plan;
    const ran = planNodes(plan).filter((n) => (n["Actual Loops"] ?? 0) > 0 && n["Relation Name"] === "facts");
    expect(ran.map((n) => n["Index Name"])).toContain(vectorIndexName("facts", dims));
    const read = ran.reduce(
      (sum, n) => sum + ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 0),
      0,
    );
    // Three searches of their candidates, not three reads of the dataset's 2,100 facts.
    expect(read).toBeLessThan(VECTOR_SCAN_MAX / 2);
    for (const dataset of ["large", "small-7"]) {
      const rows = rowsOf<{ i: number | string; object: string; distance: number }>(
        await svc.deps.db.execute(near(dataset)),
      );
      const nearest = (i: number) => rows.filter((r) => Number(r.i) === i).sort((a, b) => a.distance - b.distance)[0];
      // Each new fact finds its twin where the dataset holds it (small-7 holds boat 7 alone).
      expect(nearest(1)?.object).toBe("boat 7");
      if (dataset === "large") expect([nearest(2)?.object, nearest(3)?.object]).toEqual(["boat 300", "boat 1999"]);
    }
  });

  it("extraction's entity resolution never reads a large dataset's entities whole", async () => {
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, VECTOR_SCAN_MAX + 100, () => "large");
    await insertEntities(t.projectId, "large", 3_000);
    await insertFacts(t.projectId, 40, () => "own");
    await insertEntities(t.projectId, "own", 20);
    const vector = (text: string) => `[${fakeEmbedding(text, dims).join(",")}]`;
    // A new entity named as an existing one; one embedded as "club 12" under another name.
    const found = (dataset: string) => sql`SELECT eq.i, c.id, c.sim, c.same_name
      FROM jsonb_to_recordset(${JSON.stringify([
        { i: 1, n: "CLUB 7", t: "organization", v: vector("somewhere else") },
        { i: 2, n: "The Twelfth", t: "organization", v: vector("club 12") },
      ])}::jsonb) AS x(i int, n text, t text, v text)
      CROSS JOIN LATERAL (SELECT x.i, x.n, x.t, x.v::halfvec AS v) eq
      CROSS JOIN LATERAL (${existingEntitySql(svc.deps, { project_id: t.projectId, dataset })}) c ORDER BY eq.i`;
    const scans = await entityScans(found("large"));
    expect(scans.map((n) => n.index)).toContain(vectorIndexName("entities", dims));
    expect(scans.reduce((sum, n) => sum + n.read, 0)).toBeLessThan(100);
    for (const dataset of ["large", "own"]) {
      const rows = rowsOf<{ id: string; sim: number; same_name: boolean }>(await svc.deps.db.execute(found(dataset)));
      expect(rows.map((r) => [r.id.replace(/^ent_vp_\w+?_/, ""), r.same_name])).toEqual([
        ["7", true],
        ["12", false],
      ]);
      expect(rows[1]?.sim).toBeCloseTo(1, 3);
    }
    const own = await entityScans(found("own"));
    expect(own.map((n) => n.index)).not.toContain(vectorIndexName("entities", dims));
    for (const n of own) expect(n.read).toBeLessThanOrEqual(21 * 2);
    // Per new entity, its type's rows counted once and read once (the name lookup: 1 row).
    expect(own.reduce((sum, n) => sum + n.read, 0)).toBeLessThanOrEqual(1 + 2 * 21 * 2);
  });

  it(`extraction's entity resolution in a dataset of at most ${VECTOR_SCAN_MAX} facts but more entities of a type finds any of them`, async () => {
    const t = await newTenant(svc, `vp-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, 40, () => "own");
    await insertEntities(t.projectId, "own", VECTOR_SCAN_MAX + 100);
    // Embedded as "club 0", the name that sorts first: the last the exact path would have read.
    const rows = rowsOf<{ id: string; sim: number; same_name: boolean }>(
      await svc.deps.db.execute(sql`SELECT c.id, c.sim, c.same_name
        FROM (SELECT 'The First'::text AS n, 'organization'::text AS t,
          ${`[${fakeEmbedding("club 0", dims).join(",")}]`}::halfvec AS v) eq
        CROSS JOIN LATERAL (${existingEntitySql(svc.deps, { project_id: t.projectId, dataset: "own" })}) c`),
    );
    expect(rows.map((r) => [r.id.replace(/^ent_vp_\w+?_/, ""), r.same_name])).toEqual([["0", false]]);
    expect(rows[0]?.sim).toBeCloseTo(1, 3);
  });
});

import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEYWORD_SCAN_MAX_DOCS } from "../../lib/recall/keyword";
import { recallSql, retrieve } from "../../lib/recall/retrieve";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Recall's keyword lookups in a small dataset read the dataset's own rows, never the keyword
 * (GIN) index, whose posting list for a word spans every tenant: among a million facts that was
 * most of a small dataset's recall (bench/RESULTS.md). A dataset past KEYWORD_SCAN_MAX_DOCS keeps
 * the index. Shown with sequential scans off, where the planner would otherwise take the index
 * for both; on PGlite and, under `npm run test:pg`, on the server.
 */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(async () => {
  await svc?.close();
});

/** `count` facts in dataset `dataset` of a new project, "boat <i>" each, plus one about a lighthouse. */
async function dataset(count: number) {
  const t = await newTenant(svc, `kw-${randomUUID().slice(0, 6)}`);
  await svc.deps.db.execute(sql`
    INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
    SELECT 'fct_kw_' || ${t.projectId} || '_' || g, ${t.projectId}, 'ds', 'user', 'owns',
      CASE WHEN g = 1 THEN 'a lighthouse' ELSE 'boat ' || g END, 0.9, 'I said so', now()
    FROM generate_series(1, ${count}) g`);
  return t.projectId;
}

async function keywordRecall(projectId: string) {
  const r = { projectId, dataset: "ds", mode: "keyword" as const, query: "lighthouse", facts: true, episodes: false };
  const plan = await svc.deps.db.transaction(async (tx) => {
    await tx.execute(sql`SET LOCAL enable_seqscan = off`);
    return planOf(await tx.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(svc.deps, r)}`)).Plan;
  });
  const found = await retrieve(svc.deps, r);
  // The plan's nodes that ran at least once.
  const nodes = planNodes(plan).filter((n) => (n["Actual Loops"] ?? 0) > 0);
  return {
    read: nodes.flatMap((n) => n["Index Name"] ?? []),
    // The dataset's rows filtered by the word without the index (matchesWithoutIndex).
    scanned: nodes.some((n) => n.Filter?.includes("IS TRUE")),
    objects: (found.facts ?? []).map((f) => f.object),
  };
}

describe("keyword candidates by dataset size", { timeout: 60_000 }, () => {
  it("a small dataset finds a word's facts from its own rows, without the keyword index", async () => {
    const { read, scanned, objects } = await keywordRecall(await dataset(50));
    expect(objects).toContain("a lighthouse");
    expect(read).not.toContain("facts_search_idx");
    expect(scanned).toBe(true);
  });

  it(`past ${KEYWORD_SCAN_MAX_DOCS} facts it looks the word up as before (the index, when the plan takes it)`, async () => {
    const { scanned, objects } = await keywordRecall(await dataset(KEYWORD_SCAN_MAX_DOCS + 50));
    expect(objects).toContain("a lighthouse");
    expect(scanned).toBe(false);
  });
});

describe("many keyword candidates", { timeout: 60_000 }, () => {
  it("are scored without comparing each with every other, in the plan recall runs (generic)", async () => {
    // 300 facts, a colour word in each 100: the query's three words bring all 300 as candidates.
    const t = await newTenant(svc, `kw-${randomUUID().slice(0, 6)}`);
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
      SELECT 'fct_kwc_' || ${t.projectId} || '_' || g, ${t.projectId}, 'ds', 'user', 'owns',
        (ARRAY['a red', 'a blue', 'a green'])[g % 3 + 1] || ' kite number ' || g, 0.9, 'I said so', now()
      FROM generate_series(1, 300) g`);
    const r = {
      projectId: t.projectId,
      dataset: "ds",
      mode: "keyword" as const,
      query: "red blue green",
      facts: true,
      episodes: false,
    };
    const plan = await svc.deps.db.transaction(async (tx) => {
      await tx.execute(sql`SET LOCAL plan_cache_mode = force_generic_plan`);
      return planOf(await tx.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(svc.deps, r)}`)).Plan;
    });
    const compared = planNodes(plan).map((n) => (n["Rows Removed by Join Filter"] ?? 0) * (n["Actual Loops"] ?? 1));
    // Before the fix, one join removed 300 × 299 rows.
    expect(Math.max(...compared)).toBeLessThan(1_000);
    const found = (await retrieve(svc.deps, r)).facts ?? [];
    expect(found.length).toBeGreaterThan(0);
    for (const f of found) expect(f.object).toMatch(/red|blue|green/);
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listFacts, listFactsSql } from "../../lib/semantic/facts";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * `GET /v1/memory/semantic/datasets/:dataset/facts` answers a page and the total. Read as one
 * scan with a window count, every matching fact was read and sorted before the LIMIT (19 ms at
 * 20,000 facts on the embedded database). The page now reads its own rows along the dataset's
 * `validAt` index; only the count reads them all.
 */
let svc: TestService;
beforeAll(async () => {
  // A database of its own: the plan depends on the facts table's size.
  svc = await createTestService();
});
afterAll(async () => {
  await svc?.close();
});

describe("the fact list of a dataset of many facts", () => {
  it("reads its page's rows along the index, and counts the rest", async () => {
    const { projectId } = await newTenant(svc, "fact-list");
    // 3,000 facts, one a minute back from now; every tenth invalidated.
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, episode_id, subject, predicate, object, object_is_entity,
        confidence, source_quote, valid_at, invalid_at, created_at)
      SELECT 'fct_list_' || lpad(g::text, 4, '0'), ${projectId}, 'd', 'epi_list', 'user', 'likes', 'thing ' || g,
        false, 0.9, 'I like thing ' || g, now() - make_interval(mins => g), CASE WHEN g % 10 = 0 THEN now() END, now()
      FROM generate_series(1, 3000) g`);
    // As autovacuum leaves a table this size.
    await svc.deps.db.execute(sql`VACUUM ANALYZE facts`);

    const query = { dataset: "d", limit: 20 };
    const plan = planOf(
      await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${listFactsSql(projectId, query)}`),
    );
    const scans = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "facts");
    const rowsRead = scans
      .map((n) => (n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0))
      .sort((a, b) => a - b);
    // The page: its 20 live rows and the 2 invalidated among them; the count: every row.
    expect(rowsRead[0]).toBeLessThanOrEqual(23);
    expect(rowsRead.at(-1)).toBe(3000);

    const listed = await listFacts({ deps: svc.deps, projectId }, query);
    expect(listed.total).toBe(2700);
    const newest = Array.from({ length: 22 }, (_, i) => i + 1).filter((g) => g % 10 !== 0);
    expect(listed.facts.map((f) => f.object)).toEqual(newest.map((g) => `thing ${g}`));
    expect(listed.facts[0]).toMatchObject({ confidence: 0.9, invalidAt: null, relevanceScore: 1 });
  });
});

import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { analyzeGrownTables } from "../../lib/db/pglite-statistics";
import { rowsOf } from "../../lib/db/rows";
import { silentLogger } from "../../lib/log";
import { fakeEmbedding } from "../helpers/fake-openai";
import { planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The embedded database has no autovacuum: the host takes its planner statistics itself
 * (lib/db/pglite-statistics.ts), at start and then as its tables grow. Embedded only: a server's
 * autovacuum does it there.
 */
let svc: TestService;
const lines: { message: string; fields?: Record<string, unknown> }[] = [];
beforeAll(async () => {
  svc = await createTestService({
    statistics: "host",
    log: { ...silentLogger, info: (message, fields) => lines.push({ message, fields }) },
  });
  await svc.settle();
});
afterAll(async () => {
  await svc?.close();
});

const analysed = async (table: string) =>
  rowsOf<{ n: number | string }>(
    await svc.deps.db.execute(sql`SELECT count(*) AS n FROM pg_statistic WHERE starelid = ${table}::regclass`),
  ).map((r) => Number(r.n))[0] ?? 0;

async function insertFacts(projectId: string, dataset: string, count: number) {
  const dims = svc.deps.config.openai.embeddingDimensions;
  const rows = Array.from({ length: count }, (_, g) => ({ g, v: `[${fakeEmbedding(`boat ${g}`, dims).join(",")}]` }));
  await svc.deps.db.execute(sql`
    INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
    SELECT ${`fct_st_${randomUUID().slice(0, 8)}_`} || x.g, ${projectId}, ${dataset}, 'user', 'owns', 'boat ' || x.g, 0.9,
      'I said so', now(), x.v::halfvec
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(g int, v text)`);
}

/** The planner's guess of a dataset's live facts. */
async function guessedRows(projectId: string, dataset: string) {
  const plan = planOf(
    await svc.deps.db.execute(sql`EXPLAIN (FORMAT JSON)
      SELECT id FROM facts WHERE project_id = ${projectId} AND dataset = ${dataset} AND invalid_at IS NULL`),
  );
  return (plan.Plan as { "Plan Rows"?: number })["Plan Rows"] ?? 0;
}

describe.skipIf(Boolean(process.env.TEST_PG_URL))("the embedded database's planner statistics", () => {
  it("are taken at the host's start for the tables holding rows (the admin's user)", async () => {
    expect(await analysed("users")).toBeGreaterThan(0);
    expect(await analysed("facts")).toBe(0);
    expect(
      lines.some(
        (l) => l.message.includes("statistics") && ((l.fields?.tables as string[] | undefined) ?? []).includes("users"),
      ),
    ).toBe(true);
  });

  it("are taken again for a table that grew, so the planner knows a large dataset is large", async () => {
    const t = await newTenant(svc, `st-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, "large", 3_000);
    for (let d = 0; d < 20; d++) await insertFacts(t.projectId, `small-${d}`, 5);
    // Never analysed: the guess for any dataset is a few rows.
    expect(await guessedRows(t.projectId, "large")).toBeLessThan(100);
    expect(await analyzeGrownTables(svc.deps.db, silentLogger)).toContain("facts");
    expect(await analysed("facts")).toBeGreaterThan(0);
    expect(await guessedRows(t.projectId, "large")).toBeGreaterThan(2_000);
    // Nothing grew since: nothing is analysed again.
    expect(await analyzeGrownTables(svc.deps.db, silentLogger)).not.toContain("facts");
    await insertFacts(t.projectId, "large", 1_000);
    expect(await analyzeGrownTables(svc.deps.db, silentLogger)).toContain("facts");
    expect(await guessedRows(t.projectId, "large")).toBeGreaterThan(3_000);
  });
});

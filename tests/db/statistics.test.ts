import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { analyzeGrownTables } from "../../lib/db/pglite-statistics";
import { eachTableInTurn, VACUUM_SCALE, VACUUM_THRESHOLD, vacuumTables } from "../../lib/db/pglite-vacuum";
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

  it("are taken again for a table whose rows changed, though a vacuum recorded its new size first", async () => {
    const t = await newTenant(svc, `st-${randomUUID().slice(0, 6)}`);
    await analyzeGrownTables(svc.deps.db, silentLogger);
    await insertFacts(t.projectId, "grows", 2_000);
    // The host vacuums before it analyses: the vacuum records the table's pages as ANALYZE does.
    await svc.deps.db.execute(sql`VACUUM facts`);
    await flushStatistics();
    expect(await guessedRows(t.projectId, "grows")).toBeLessThan(100);
    expect(await analyzeGrownTables(svc.deps.db, silentLogger)).toContain("facts");
    expect(await guessedRows(t.projectId, "grows")).toBeGreaterThan(500);
  });
});

/**
 * The session's pending counts into the statistics views now (Postgres flushes them at most once
 * a second): the host's checks, ten minutes apart, never wait for it; a test does.
 */
const flushStatistics = () => svc.deps.db.execute(sql`SELECT pg_stat_force_next_flush()`);

/** A table's dead rows and its oldest unfrozen row's age, as the vacuum pass reads them. */
async function activity(table: string) {
  const [row] = rowsOf<{ live: string; dead: string; age: string; vacuumed: boolean }>(
    await svc.deps.db.execute(sql`
      SELECT s.n_live_tup AS live, s.n_dead_tup AS dead, age(c.relfrozenxid) AS age, s.last_vacuum IS NOT NULL AS vacuumed
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = ${table}`),
  );
  return { live: Number(row?.live), dead: Number(row?.dead), age: Number(row?.age), vacuumed: row?.vacuumed };
}

describe.skipIf(Boolean(process.env.TEST_PG_URL))("the embedded database's vacuum", () => {
  it("lets a request waiting behind one table's maintenance run all its statements before the next table's", async () => {
    const order: string[] = [];
    const maintenance = eachTableInTurn(["facts", "threads", "messages"], async (table) => {
      await svc.deps.db.execute(sql.raw(`VACUUM ${table}`));
      order.push(`vacuum ${table}`);
    });
    const request = (async () => {
      for (const i of [1, 2, 3]) {
        await svc.deps.db.execute(sql`SELECT ${i}::int`);
        order.push(`request ${i}`);
      }
    })();
    const took = (await Promise.all([maintenance, request]))[0];
    expect(Object.keys(took)).toEqual(["facts", "threads", "messages"]);
    // Issued back to back, the request's second statement waited behind the second table's.
    expect(order.indexOf("request 3")).toBeLessThan(order.indexOf("vacuum threads"));
  });

  it("vacuums a table whose dead rows pass autovacuum's threshold, freezing its rows, and leaves it be after", async () => {
    const t = await newTenant(svc, `vc-${randomUUID().slice(0, 6)}`);
    await insertFacts(t.projectId, "churn", 1_500);
    await vacuumTables(svc.deps.db, silentLogger);
    // Each update leaves the row's old version behind (a fact's row is two to a page: no room
    // for the new version beside it), as superseding a fact does.
    for (let i = 0; i < 3; i++) {
      await svc.deps.db.execute(
        sql`UPDATE facts SET confidence = confidence WHERE project_id = ${t.projectId} AND dataset = 'churn'`,
      );
    }
    await flushStatistics();
    const before = await activity("facts");
    expect(before.dead).toBeGreaterThan(VACUUM_THRESHOLD + VACUUM_SCALE * before.live);
    // The three updates' transactions ran since the table was last frozen: their ids are not frozen.
    expect(before.age).toBeGreaterThanOrEqual(3);

    expect(await vacuumTables(svc.deps.db, silentLogger)).toContain("facts");
    const after = await activity("facts");
    expect(after).toMatchObject({ dead: 0, vacuumed: true });
    // FREEZE: the table's oldest unfrozen id is no older than the vacuum itself.
    expect(after.age).toBeLessThan(before.age);
    expect(after.age).toBeLessThanOrEqual(1);
    expect(await vacuumTables(svc.deps.db, silentLogger)).not.toContain("facts");
    // The rows are all there.
    const [live] = rowsOf<{ n: string }>(
      await svc.deps.db.execute(sql`SELECT count(*) AS n FROM facts WHERE project_id = ${t.projectId}`),
    );
    expect(Number(live.n)).toBe(1_500);
  });

  it("freezes every table of the database past the freeze age, the system catalogs' too, so the database's own age falls", async () => {
    const databaseAge = async () =>
      Number(
        rowsOf<{ age: string }>(
          await svc.deps.db.execute(
            sql`SELECT age(datfrozenxid) AS age FROM pg_database WHERE datname = current_database()`,
          ),
        )[0]?.age,
      );
    // Transactions spent since the database was made: its oldest unfrozen row is at least that old.
    for (let i = 0; i < 5; i++) await svc.deps.db.execute(sql`UPDATE api_keys SET last_used_at = now()`);
    const before = await databaseAge();
    expect(before).toBeGreaterThanOrEqual(5);
    // A freeze age of 0 stands for the 200 million transactions a real database would have spent.
    const vacuumed = await vacuumTables(svc.deps.db, silentLogger, { freezeMaxAge: 0 });
    expect(vacuumed).toEqual(expect.arrayContaining(["facts", "messages", "pg_class", "pg_statistic"]));
    expect(await databaseAge()).toBeLessThan(Math.min(before, 5));
  });
});

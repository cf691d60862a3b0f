import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0028 (each project's tokens per month, kept by triggers on the ledger) on a database
 * whose ledger already holds calls: the months' totals start at the ledger's sums, and calls
 * written after it add to them.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const call = (project: string, at: string, tokens: number | null) => sql`
  INSERT INTO usage_events (project_id, dataset, operation, kind, model, total_tokens, outcome, created_at)
  VALUES (${project}, 'd', 'chat', 'chat', 'm', ${tokens}, 'ok', ${at}::timestamptz)`;

/** Per project and month (YYYY-MM): the totals table against the ledger's own sums. */
async function totals() {
  const read = async (q: ReturnType<typeof sql>) =>
    rowsOf<{ project_id: string; month: string; tokens: number }>(await database.db.execute(q));
  return {
    kept: await read(sql`SELECT project_id, to_char(month AT TIME ZONE 'UTC', 'YYYY-MM') AS month, sum(tokens)::int AS tokens
      FROM usage_month_tokens GROUP BY 1, 2 HAVING sum(tokens) <> 0 ORDER BY 1, 2`),
    ledger:
      await read(sql`SELECT project_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month, sum(total_tokens)::int AS tokens
      FROM usage_events GROUP BY 1, 2 HAVING sum(total_tokens) <> 0 ORDER BY 1, 2`),
  };
}

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0028_usage_month_tokens", DIMS));
  await database.db.execute(sql`INSERT INTO projects (id, name) VALUES ('prj_other', 'other')`);
  // The last instant of October and the first of November, in UTC.
  await database.db.execute(call("prj_old", "2026-10-31T23:59:59.999Z", 40));
  await database.db.execute(call("prj_old", "2026-11-01T00:00:00.000Z", 7));
  await database.db.execute(call("prj_old", "2026-11-20T10:00:00.000Z", 5));
  await database.db.execute(call("prj_old", "2026-11-21T10:00:00.000Z", null));
  await database.db.execute(call("prj_other", "2026-11-02T10:00:00.000Z", 100));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0028: each project's tokens per month", () => {
  it("starts at the ledger's sums, by UTC calendar month", async () => {
    const { kept, ledger } = await totals();
    expect(kept).toEqual([
      { project_id: "prj_old", month: "2026-10", tokens: 40 },
      { project_id: "prj_old", month: "2026-11", tokens: 12 },
      { project_id: "prj_other", month: "2026-11", tokens: 100 },
    ]);
    expect(kept).toEqual(ledger);
  });

  it("adds the calls written after it, and subtracts pruned ones", async () => {
    await database.db.execute(call("prj_old", "2026-11-25T10:00:00.000Z", 30));
    await database.db.execute(sql`
      INSERT INTO usage_events (project_id, dataset, operation, kind, model, total_tokens, outcome, created_at)
      VALUES ('prj_old', 'd', 'chat', 'chat', 'm', 2, 'ok', '2026-12-01T00:00:00.000Z'),
        ('prj_other', 'd', 'chat', 'chat', 'm', 3, 'ok', '2026-11-30T23:00:00.000Z')`);
    await database.db.execute(sql`DELETE FROM usage_events WHERE total_tokens = 40`);
    const { kept, ledger } = await totals();
    expect(kept).toEqual(ledger);
    expect(kept).toContainEqual({ project_id: "prj_old", month: "2026-11", tokens: 42 });
    expect(kept).toContainEqual({ project_id: "prj_old", month: "2026-12", tokens: 2 });
    // A project's deletion takes its calls and its totals together.
    await database.db.execute(sql`DELETE FROM projects WHERE id = 'prj_other'`);
    expect((await totals()).kept.map((r) => r.project_id)).toEqual(["prj_old", "prj_old"]);
  });
});

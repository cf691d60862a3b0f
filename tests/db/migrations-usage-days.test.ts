import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0040 (the ledger's sums per project, UTC day, dataset, operation and model, kept by
 * triggers) on a database whose ledger already holds calls: the sums start at the ledger's, and
 * calls written or pruned after it move them.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const call = (project: string, at: string, dataset: string | null, tokens: number | null, outcome = "ok") => sql`
  INSERT INTO usage_events (project_id, dataset, operation, kind, model, input_tokens, total_tokens, outcome, created_at)
  VALUES (${project}, ${dataset}, 'chat', 'chat', 'm', ${tokens}, ${tokens}, ${outcome}, ${at}::timestamptz)`;

/** Per project, day and dataset: the daily sums against the ledger's own. */
async function sums() {
  const read = async (q: ReturnType<typeof sql>) => rowsOf<Record<string, unknown>>(await database.db.execute(q));
  return {
    kept: await read(sql`SELECT project_id, to_char(day, 'YYYY-MM-DD') AS day, nullif(dataset, '') AS dataset,
        sum(calls)::int AS calls, sum(input_tokens)::int AS input, sum(total_tokens)::int AS total,
        sum(unknown_calls)::int AS unknown, sum(failed_calls)::int AS failed
      FROM usage_days GROUP BY 1, 2, 3 HAVING sum(calls) <> 0 ORDER BY 1, 2, 3`),
    ledger: await read(sql`SELECT project_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, dataset,
        count(*)::int AS calls, coalesce(sum(input_tokens), 0)::int AS input, coalesce(sum(total_tokens), 0)::int AS total,
        count(*) FILTER (WHERE total_tokens IS NULL)::int AS unknown, count(*) FILTER (WHERE outcome <> 'ok')::int AS failed
      FROM usage_events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`),
  };
}

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0040_usage_days", DIMS));
  await database.db.execute(sql`INSERT INTO projects (id, name) VALUES ('prj_other', 'other')`);
  // The last instant of a UTC day and the first of the next.
  await database.db.execute(call("prj_old", "2026-10-31T23:59:59.999Z", "d", 40));
  await database.db.execute(call("prj_old", "2026-11-01T00:00:00.000Z", "d", 7));
  await database.db.execute(call("prj_old", "2026-11-01T10:00:00.000Z", null, null));
  await database.db.execute(call("prj_old", "2026-11-01T11:00:00.000Z", "d", null, "error"));
  await database.db.execute(call("prj_other", "2026-11-02T10:00:00.000Z", "d", 100));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0040: the ledger's sums per day", () => {
  it("starts at the ledger's sums, by UTC day", async () => {
    const { kept, ledger } = await sums();
    expect(kept).toEqual(ledger);
    expect(kept).toContainEqual({
      project_id: "prj_old",
      day: "2026-11-01",
      dataset: "d",
      calls: 2,
      input: 7,
      total: 7,
      unknown: 1,
      failed: 1,
    });
    expect(kept).toHaveLength(4);
  });

  it("adds the calls written after it, and subtracts pruned ones", async () => {
    await database.db.execute(call("prj_old", "2026-11-01T12:00:00.000Z", "d", 30));
    await database.db.execute(sql`
      INSERT INTO usage_events (project_id, dataset, operation, kind, model, total_tokens, outcome, created_at)
      VALUES ('prj_old', 'd', 'chat', 'chat', 'm', 2, 'ok', '2026-11-02T00:00:00.000Z'),
        ('prj_other', 'd', 'chat', 'chat', 'm', 3, 'ok', '2026-11-02T23:00:00.000Z')`);
    await database.db.execute(sql`DELETE FROM usage_events WHERE total_tokens = 40 OR outcome = 'error'`);
    const { kept, ledger } = await sums();
    expect(kept).toEqual(ledger);
    expect(kept).toContainEqual({
      project_id: "prj_old",
      day: "2026-11-01",
      dataset: "d",
      calls: 2,
      input: 37,
      total: 37,
      unknown: 0,
      failed: 0,
    });
    expect(kept.map((r) => r.day)).not.toContain("2026-10-31");
    // A project's deletion takes its calls and its sums together.
    await database.db.execute(sql`DELETE FROM projects WHERE id = 'prj_other'`);
    expect(new Set((await sums()).kept.map((r) => r.project_id))).toEqual(new Set(["prj_old"]));
  });

  it("empties the sums, the month's tokens too, when the ledger is truncated", async () => {
    await database.db.execute(sql`TRUNCATE usage_events`);
    expect(await sums()).toEqual({ kept: [], ledger: [] });
    const [month] = rowsOf<{ n: number }>(
      await database.db.execute(sql`SELECT count(*)::int AS n FROM usage_month_tokens`),
    );
    expect(month.n).toBe(0);
  });
});

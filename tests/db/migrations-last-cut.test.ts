import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0020 (a thread's latest cut on its row) on a database made before it: each thread
 * takes the trigger and time of its latest live episode, archived ones skipped, so an end sent
 * after the upgrade decides a repeat as it did before.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const episode = (id: string, thread: string, status: string, trigger: string, at: string, toSeq: number) => sql`
  INSERT INTO episodes (id, project_id, thread_id, dataset, status, from_seq, to_seq, started_at, ended_at,
    metadata, created_at)
  VALUES (${id}, 'prj_old', ${thread}, 'ds', ${status}, 1, ${toSeq}, ${at}::timestamptz, ${at}::timestamptz,
    ${JSON.stringify({ trigger })}::jsonb, ${at}::timestamptz)`;

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0020_thread_last_cut", DIMS));
  for (const id of ["thr_a", "thr_b", "thr_c"]) {
    await database.db.execute(sql`INSERT INTO threads (id, project_id, dataset) VALUES (${id}, 'prj_old', 'ds')`);
  }
  await database.db.execute(episode("epi_a1", "thr_a", "completed", "end", "2026-11-01T00:00:00Z", 3));
  await database.db.execute(episode("epi_a2", "thr_a", "pending", "idle", "2026-11-02T00:00:00Z", 5));
  await database.db.execute(episode("epi_b1", "thr_b", "completed", "end", "2026-11-01T00:00:00Z", 2));
  await database.db.execute(episode("epi_b2", "thr_b", "archived", "sibling", "2026-11-03T00:00:00Z", 4));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0020: a thread's latest cut on its row", () => {
  it("takes each thread's latest live episode's trigger and time; a thread never cut keeps none", async () => {
    const rows = rowsOf<{ id: string; last_cut_trigger: string | null; last_cut_at: string | null }>(
      await database.db.execute(
        sql`SELECT id, last_cut_trigger, to_char(last_cut_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS last_cut_at
          FROM threads ORDER BY id`,
      ),
    );
    expect(rows).toEqual([
      { id: "thr_a", last_cut_trigger: "idle", last_cut_at: "2026-11-02" },
      { id: "thr_b", last_cut_trigger: "end", last_cut_at: "2026-11-01" },
      { id: "thr_c", last_cut_trigger: null, last_cut_at: null },
    ]);
  });
});

import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0033 (a thread's compaction summaries counted on its row) on a database made before
 * it: each thread takes the count of its summary messages, so its `messageCount` is the messages
 * written from the first read after the upgrade.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const message = (id: string, thread: string, seq: number, summary: boolean) => sql`
  INSERT INTO messages (id, project_id, thread_id, seq, role, content, is_summary)
  VALUES (${id}, 'prj_old', ${thread}, ${seq}, ${summary ? "system" : "user"}, ${`message ${seq}`}, ${summary})`;

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0033_thread_summary_count", DIMS));
  for (const [id, lastSeq] of [
    ["thr_a", 4],
    ["thr_b", 2],
  ] as const) {
    await database.db.execute(
      sql`INSERT INTO threads (id, project_id, dataset, last_seq) VALUES (${id}, 'prj_old', 'ds', ${lastSeq})`,
    );
  }
  await database.db.execute(message("msg_a1", "thr_a", 1, false));
  await database.db.execute(message("msg_a2", "thr_a", 2, true));
  await database.db.execute(message("msg_a3", "thr_a", 3, false));
  await database.db.execute(message("msg_a4", "thr_a", 4, true));
  await database.db.execute(message("msg_b1", "thr_b", 1, false));
  await database.db.execute(message("msg_b2", "thr_b", 2, false));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0033: compaction summaries counted on the thread", () => {
  it("counts each thread's summary messages; a thread never compacted has none", async () => {
    const rows = rowsOf<{ id: string; summary_count: number }>(
      await database.db.execute(sql`SELECT id, summary_count FROM threads ORDER BY id`),
    );
    expect(rows).toEqual([
      { id: "thr_a", summary_count: 2 },
      { id: "thr_b", summary_count: 0 },
    ]);
  });
});

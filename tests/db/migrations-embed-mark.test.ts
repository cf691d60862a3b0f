import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0027 (a thread's `embedded_seq`, below which every indexed message has its vector and
 * is counted into the keyword statistics) on a database made before it: each thread starts just
 * below its first indexed message lacking either, at its last message when none does, so the
 * job skips nothing it has still to count or embed.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const vector = `[${Array.from({ length: DIMS }, (_, i) => (i === 0 ? 1 : 0)).join(",")}]`;

/**
 * A thread of `last` messages, user ones indexed at `indexed`, those at `embedded` with a vector
 * too, and those at `counted` (by default the embedded ones) counted.
 */
async function thread(id: string, last: number, indexed: number[], embedded: number[], counted = embedded) {
  const db = database.db;
  await db.execute(
    sql`INSERT INTO threads (id, project_id, dataset, last_seq) VALUES (${id}, 'prj_old', 'ds', ${last})`,
  );
  for (let seq = 1; seq <= last; seq++) {
    const message = `${id}_msg_${seq}`;
    await db.execute(sql`INSERT INTO messages (id, project_id, thread_id, seq, role, content)
      VALUES (${message}, 'prj_old', ${id}, ${seq}, ${indexed.includes(seq) ? "user" : "assistant"}, ${`said ${seq}`})`);
    if (indexed.includes(seq)) {
      await db.execute(sql`INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search, terms_counted)
        VALUES (${message}, 'prj_old', ${id}, 'ds', now(), to_tsvector('english', ${`said ${seq}`}), ${counted.includes(seq)})`);
    }
    if (embedded.includes(seq)) {
      await db.execute(sql`INSERT INTO message_vectors (message_id, project_id, thread_id, dataset, created_at, embedding)
        VALUES (${message}, 'prj_old', ${id}, 'ds', now(), ${vector}::halfvec)`);
    }
  }
}

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0027_message_embed_watermark", DIMS));
  // Embedded up to 3, then 5 waits (4 is the assistant's, not indexed), 6 is embedded after it.
  await thread("thr_gap", 7, [1, 3, 5, 6, 7], [1, 3, 6]);
  await thread("thr_done", 4, [1, 3], [1, 3]);
  // Every one embedded, 2 not counted.
  await thread("thr_uncounted", 3, [1, 2, 3], [1, 2, 3], [1, 3]);
  await thread("thr_none", 3, [1, 2, 3], []);
  await thread("thr_empty", 0, [], []);
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0027: where each thread's embedding job starts", () => {
  it("is just below the first indexed message without a vector or not counted, or the thread's last message", async () => {
    const marks = rowsOf<{ id: string; embedded_seq: number }>(
      await database.db.execute(sql`SELECT id, embedded_seq FROM threads ORDER BY id`),
    );
    expect(marks).toEqual([
      { id: "thr_done", embedded_seq: 4 },
      { id: "thr_empty", embedded_seq: 0 },
      { id: "thr_gap", embedded_seq: 4 },
      { id: "thr_none", embedded_seq: 0 },
      { id: "thr_uncounted", embedded_seq: 1 },
    ]);
  });
});

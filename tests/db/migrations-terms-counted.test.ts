import { rmSync } from "node:fs";
import { type SQL, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0019 (messages' keyword statistics counted off the write path) on a database made
 * before it: the index rows the old insert trigger counted read `terms_counted` true, so the
 * statistics stay exact; rows written from then on start uncounted and are not counted by any
 * trigger; the delete trigger subtracts the counted rows only.
 */
const DIMS = 64;
let database: Database;
let folder: string;

const row = (id: string, text: string) => sql`
  INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search)
  VALUES (${id}, 'prj_old', 'thr_old', 'ds', now(), to_tsvector('english', ${text}))`;

/** message_terms (rows not all zero) and a recount of the counted index rows, as [term, docs, lexemes]. */
async function statistics() {
  const read = async (q: SQL) =>
    rowsOf<{ term: string; docs: number; lexemes: number }>(await database.db.execute(q)).map((r) => [
      r.term,
      r.docs,
      r.lexemes,
    ]);
  return {
    kept: await read(sql`SELECT term, docs::int AS docs, lexemes::int AS lexemes FROM message_terms
      WHERE docs <> 0 OR lexemes <> 0 ORDER BY term`),
    recount: await read(sql`SELECT term, docs::int AS docs, lexemes::int AS lexemes FROM (
      SELECT u.lexeme AS term, count(*) AS docs, 0 AS lexemes FROM message_search s, unnest(s.search) u
      WHERE s.terms_counted GROUP BY u.lexeme
      UNION ALL
      SELECT '', count(*), coalesce(sum(length(search)), 0) FROM message_search WHERE terms_counted) x
      WHERE docs <> 0 ORDER BY term`),
  };
}

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0019_message_terms_counted", DIMS));
  await database.db.execute(sql`INSERT INTO threads (id, project_id, dataset) VALUES ('thr_old', 'prj_old', 'ds')`);
  await database.db.execute(row("msg_old_1", "Gannets dive for fish."));
  await database.db.execute(row("msg_old_2", "Gannets nest on cliffs."));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0019: message statistics counted off the write path", () => {
  it("keeps the rows the old trigger counted as counted, and the statistics as they were", async () => {
    const flags = rowsOf<{ message_id: string; terms_counted: boolean }>(
      await database.db.execute(sql`SELECT message_id, terms_counted FROM message_search ORDER BY message_id`),
    );
    expect(flags).toEqual([
      { message_id: "msg_old_1", terms_counted: true },
      { message_id: "msg_old_2", terms_counted: true },
    ]);
    const s = await statistics();
    expect(s.kept).toEqual(s.recount);
    expect(s.kept).toContainEqual(["gannet", 2, 0]);
  });

  it("writes new rows uncounted, counts nothing on insert, and subtracts only counted rows on delete", async () => {
    const before = await statistics();
    await database.db.execute(row("msg_new", "Gannets and terns."));
    const [fresh] = rowsOf<{ terms_counted: boolean }>(
      await database.db.execute(sql`SELECT terms_counted FROM message_search WHERE message_id = 'msg_new'`),
    );
    expect(fresh.terms_counted).toBe(false);
    expect((await statistics()).kept).toEqual(before.kept);

    await database.db.execute(sql`DELETE FROM message_search WHERE message_id IN ('msg_old_1', 'msg_new')`);
    const after = await statistics();
    expect(after.kept).toEqual(after.recount);
    expect(after.kept).toContainEqual(["gannet", 1, 0]);
    const triggers = rowsOf<{ tgname: string }>(
      await database.db.execute(sql`SELECT tgname FROM pg_trigger WHERE tgrelid = 'message_search'::regclass
        AND NOT tgisinternal ORDER BY tgname`),
    );
    expect(triggers.map((t) => t.tgname)).toEqual(["message_search_terms_delete"]);
  });
});

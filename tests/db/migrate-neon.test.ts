import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { afterAll, expect, it } from "vitest";
import { startNeonHttpEndpoint } from "../../dev/neon-http-endpoint";
import { MIGRATIONS_FOLDER, migrateDatabase } from "../../lib/db/migrate";
import { createNeonDatabase } from "../../lib/db/neon";
import { createPgliteDatabase } from "../../lib/db/pglite";
import { rowsOf } from "../../lib/db/rows";
import type { Db } from "../../lib/db/types";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";

/**
 * `npm run db:migrate` over Neon's HTTP driver (lib/db/migrate.ts): each migration is one HTTP
 * transaction with the row recording it, so a failure partway leaves nothing of that migration,
 * keeps those before it, and the next run goes on. A fresh embedded database behind the local
 * SQL-over-HTTP endpoint stands in for Neon.
 */
const closers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const tables = async (db: Db) =>
  rowsOf<{ t: string }>(
    await db.execute(sql`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`),
  ).map((r) => r.t);
const recorded = async (db: Db) =>
  rowsOf<{ n: number }>(await db.execute(sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`))[0].n;

it("a migration that fails partway leaves nothing of it and keeps those before; the next run goes on", async () => {
  const backing = await createPgliteDatabase({ dir: "memory://" });
  closers.push(() => backing.close());
  const endpoint = await startNeonHttpEndpoint({ database: backing });
  closers.push(() => endpoint.close());
  const neon = createNeonDatabase("postgres://user:pass@localhost/db", { fetchEndpoint: endpoint.fetchEndpoint });
  // The second migration's first table is in the way: it fails after the first migration ran.
  const second = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER })[1];
  const firstTable = second.sql.join("\n").match(/CREATE TABLE (?:IF NOT EXISTS )?"?(\w+)"?/)?.[1];
  expect(firstTable).toBeDefined();
  await backing.db.execute(sql.raw(`CREATE TABLE "${firstTable}" (x int)`));
  await expect(migrateDatabase(neon, TEST_EMBEDDING_DIMENSIONS)).rejects.toThrow();
  expect(await recorded(backing.db)).toBe(1);
  const afterFailure = await tables(backing.db);

  await backing.db.execute(sql.raw(`DROP TABLE "${firstTable}"`));
  await migrateDatabase(neon, TEST_EMBEDDING_DIMENSIONS);
  expect(await recorded(backing.db)).toBe(readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER }).length);
  // What the failed run left: the first migration's tables, and the one in the way.
  const [first] = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER });
  const created = [...first.sql.join("\n").matchAll(/CREATE TABLE (?:IF NOT EXISTS )?"?(\w+)"?/g)].map((m) => m[1]);
  expect(afterFailure).toEqual([...created, firstTable].sort());
  expect(await tables(backing.db)).toEqual(expect.arrayContaining(["projects", "threads", "messages", "facts"]));
}, 120_000);

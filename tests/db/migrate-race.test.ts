import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { MIGRATIONS_FOLDER, migrateDatabase } from "../../lib/db/migrate";
import { createPgDatabase } from "../../lib/db/pg";
import { rowsOf } from "../../lib/db/rows";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { dropServerDatabase, newServerDatabase, serverDatabaseUrl, testPgUrl } from "../helpers/test-database";

/**
 * Several processes migrating one PostgreSQL database at once (a rolling deploy's replicas each
 * starting with its migrations, or `npm run db:migrate` beside a restarting server): each waits for
 * the one before (lib/db/migrate.ts, MIGRATION_LOCK_KEY) and none fails. Before the lock, both read
 * the same last migration and ran the rest; one failed on a duplicate table or index.
 */
const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta/_journal.json"), "utf8")) as {
  entries: unknown[];
};
const dropped: string[] = [];
afterAll(async () => {
  for (const name of dropped) await dropServerDatabase(name);
});

async function migrateAtOnce(url: string, processes: number) {
  const databases = Array.from({ length: processes }, () => createPgDatabase(url));
  try {
    const outcomes = await Promise.allSettled(databases.map((d) => migrateDatabase(d, TEST_EMBEDDING_DIMENSIONS)));
    const [{ n }] = rowsOf<{ n: number }>(
      await databases[0].db.execute(sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`),
    );
    return { outcomes: outcomes.map((o) => (o.status === "fulfilled" ? "ok" : String(o.reason))), applied: n };
  } finally {
    await Promise.all(databases.map((d) => d.close()));
  }
}

describe.skipIf(!testPgUrl())("migrations from several processes at once (PostgreSQL)", () => {
  it("an empty database migrated by three at once: each succeeds and every migration is applied once", async () => {
    const { name, url } = await newServerDatabase({ empty: true });
    dropped.push(name);
    const result = await migrateAtOnce(url, 3);
    expect(result.outcomes).toEqual(["ok", "ok", "ok"]);
    expect(result.applied).toBe(journal.entries.length);
  });

  it.skipIf(!process.env.TEST_PGBOUNCER_URL)("the same through PgBouncer in transaction mode", async () => {
    const { name } = await newServerDatabase({ empty: true });
    dropped.push(name);
    const result = await migrateAtOnce(serverDatabaseUrl(name, process.env.TEST_PGBOUNCER_URL), 3);
    expect(result.outcomes).toEqual(["ok", "ok", "ok"]);
    expect(result.applied).toBe(journal.entries.length);
    // Migrated again later (the lock was released with its transaction): nothing to do, no error.
    expect((await migrateAtOnce(serverDatabaseUrl(name, process.env.TEST_PGBOUNCER_URL), 1)).outcomes).toEqual(["ok"]);
  });
});

import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { type MigrationConfig, readMigrationFiles } from "drizzle-orm/migrator";
import { rowsOf } from "./rows";
import type { Database, Db } from "./types";
import { ensureVectorIndexes } from "./vector-indexes";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/**
 * Taken by every migration on a PostgreSQL server, so two processes starting at once (a rolling
 * deploy's replicas, `npm run db:migrate` beside a restarting server) migrate one after the other.
 * Without it both read the same last migration and ran the next ones, and the loser failed on a
 * duplicate index.
 */
export const MIGRATION_LOCK_KEY = 7_362_819_004_311;

/** Apply drizzle-kit's SQL migrations with the driver's own migrator, then the vector indexes. */
export async function migrateDatabase(database: Database, embeddingDimensions: number): Promise<void> {
  const config: MigrationConfig = { migrationsFolder: MIGRATIONS_FOLDER };
  const db = database.db as never;
  switch (database.kind) {
    // One process only: its directory's lock (lib/db/pglite.ts).
    case "pglite":
      await (await import("drizzle-orm/pglite/migrator")).migrate(db, config);
      break;
    case "neon":
      await migrateOverHttp(database, config);
      break;
    case "pg":
      return migrateLocked(database.db, config, embeddingDimensions);
  }
  await ensureVectorIndexes(database.db, embeddingDimensions);
}

/**
 * drizzle's migrations over Neon's HTTP driver, each in one HTTP transaction with the row that
 * records it: drizzle's own neon-http migrator sent every statement as a transaction of its own
 * and recorded the migrations after the last, so a failure partway (a dropped request, a timeout,
 * Ctrl-C) left what ran committed and unrecorded, and every later run failed on "already exists".
 * Now a failed migration leaves nothing, the ones before it stay recorded, and a second run goes
 * on from it. Each transaction takes MIGRATION_LOCK_KEY first, so two runs at once do not both
 * apply a migration: the second fails on it and changes nothing (run it from one place).
 */
async function migrateOverHttp(database: Database, config: MigrationConfig): Promise<void> {
  const migrations = readMigrationFiles(config);
  const { db } = database;
  await db.execute(sql`CREATE SCHEMA IF NOT EXISTS drizzle`);
  await db.execute(sql`CREATE TABLE IF NOT EXISTS drizzle.__drizzle_migrations (
    id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
  const [last] = rowsOf<{ created_at: string | number }>(
    await db.execute(sql`SELECT created_at FROM drizzle.__drizzle_migrations ORDER BY created_at DESC LIMIT 1`),
  );
  for (const migration of migrations) {
    if (last && Number(last.created_at) >= migration.folderMillis) continue;
    await database.batch((tx) => [
      tx.execute(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`),
      ...migration.sql.map((statement) => tx.execute(sql.raw(statement))),
      tx.execute(sql`INSERT INTO drizzle.__drizzle_migrations (hash, created_at)
        VALUES (${migration.hash}, ${migration.folderMillis})`),
    ]);
  }
}

/**
 * drizzle's own migration step (the one its node-postgres migrator runs), inside a transaction
 * that first takes MIGRATION_LOCK_KEY: its read of the last applied migration comes after the
 * lock, so a second process sees what the first applied. A transaction-level lock, because a
 * pooler in transaction mode (PgBouncer, Neon's pooled endpoint) gives each transaction whichever
 * server session is free: a session-level lock could be released on another session than the one
 * holding it. drizzle's inner transaction becomes a savepoint of this one.
 */
async function migrateLocked(db: Db, config: MigrationConfig, embeddingDimensions: number): Promise<void> {
  const migrations = readMigrationFiles(config);
  await db.transaction(async (tx) => {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    const session = {
      execute: (query: ReturnType<typeof sql>) => tx.execute(query),
      all: async (query: ReturnType<typeof sql>) => rowsOf(await tx.execute(query)),
      transaction: <T>(work: (inner: typeof tx) => Promise<T>) => tx.transaction(work),
    };
    const { dialect } = db as unknown as {
      dialect: { migrate(m: unknown, s: unknown, c: MigrationConfig): Promise<void> };
    };
    await dialect.migrate(migrations, session, config);
    await ensureVectorIndexes(tx as unknown as Db, embeddingDimensions);
  });
}

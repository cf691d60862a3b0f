import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { migrate } from "drizzle-orm/pglite/migrator";
import { MIGRATIONS_FOLDER } from "../../lib/db/migrate";
import { createPgliteDatabase } from "../../lib/db/pglite";
import type { Database } from "../../lib/db/types";

/**
 * A copy of the migrations folder as it was before migration `tag` (its journal and SQL files up
 * to the one before), in a new temporary directory, for a database made as an older release made
 * it. The caller removes the directory.
 */
export function migrationsBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), "memsvc-migrations-"));
  mkdirSync(join(dir, "meta"));
  const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta", "_journal.json"), "utf8")) as {
    entries: { tag: string }[];
  };
  const upTo = journal.entries.findIndex((e) => e.tag === tag);
  if (upTo < 1) throw new Error(`no migration ${tag} after the first in the journal`);
  journal.entries = journal.entries.slice(0, upTo);
  writeFileSync(join(dir, "meta", "_journal.json"), JSON.stringify(journal));
  for (const file of readdirSync(MIGRATIONS_FOLDER).filter((f) => f.endsWith(".sql"))) {
    if (journal.entries.some((e) => `${e.tag}.sql` === file))
      copyFileSync(join(MIGRATIONS_FOLDER, file), join(dir, file));
  }
  return dir;
}

/**
 * A new in-memory database migrated up to (not including) migration `tag`, with the
 * half-precision HNSW indexes for `dims` that ensureVectorIndexes made before migrations 0013 and
 * 0015, and a project `prj_old`. Returns the database and the migrations folder to remove.
 */
export async function databaseBefore(tag: string, dims: number): Promise<{ database: Database; folder: string }> {
  const folder = migrationsBefore(tag);
  const database = await createPgliteDatabase({ dir: "memory://" });
  await migrate(database.db as never, { migrationsFolder: folder });
  for (const table of ["facts", "entities", "episodes"]) {
    await database.db.execute(
      sql.raw(
        `CREATE INDEX ${table}_embedding_hnsw_${dims} ON ${table} USING hnsw ((embedding::halfvec(${dims})) halfvec_cosine_ops) WHERE vector_dims(embedding) = ${dims}`,
      ),
    );
  }
  await database.db.execute(sql`INSERT INTO projects (id, name) VALUES ('prj_old', 'old')`);
  return { database, folder };
}

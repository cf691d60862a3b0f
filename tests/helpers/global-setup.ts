import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { migrateDatabase } from "../../lib/db/migrate";
import { createPgDatabase } from "../../lib/db/pg";
import { createPgliteDatabase, pgliteClientOf } from "../../lib/db/pglite";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";
import { dropServerDatabases, onServer, serverDatabaseUrl, templateDatabaseName, testPgUrl } from "./test-database";

/**
 * Migrate one embedded database and dump it; every test file starts from a copy of the dump
 * (about half a second) instead of starting and migrating a fresh one. The dump is also loaded
 * once into a data directory on disk, which the suites that start `npm start` or a command as a
 * process copy (tests/helpers/test-database.ts, migratedPgliteEnv). With TEST_PG_URL
 * (tests/helpers/test-database.ts), also migrate a template database on that server, from empty,
 * through node-postgres; each test database there is a `CREATE DATABASE ... TEMPLATE` of it, and
 * the run's databases are dropped at the end.
 */
export default async function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), "memsvc-template-"));
  const database = await createPgliteDatabase({ dir: "memory://" });
  await migrateDatabase(database, TEST_EMBEDDING_DIMENSIONS);
  const dump = await pgliteClientOf(database).dumpDataDir("none");
  const file = join(dir, "template.tar");
  writeFileSync(file, Buffer.from(await dump.arrayBuffer()));
  await database.close();
  project.provide("templatePath", file);
  const dataDir = join(dir, "pglite");
  await (await createPgliteDatabase({ dir: dataDir, loadDataDir: dump, durability: "fast" })).close();
  project.provide("templateDataDir", dataDir);
  const prefix = testPgUrl() ? await serverTemplate() : "";
  project.provide("pgDatabasePrefix", prefix);
  return async () => {
    rmSync(dir, { recursive: true, force: true });
    if (prefix) await dropServerDatabases(prefix);
  };
}

/** The run's migrated template on the server; returns the prefix of the run's database names. */
async function serverTemplate(): Promise<string> {
  const prefix = `memsvc_test_${Date.now().toString(36)}_`;
  const name = templateDatabaseName(prefix);
  await onServer((client) => client.query(`CREATE DATABASE "${name}"`));
  const database = createPgDatabase(serverDatabaseUrl(name));
  try {
    await migrateDatabase(database, TEST_EMBEDDING_DIMENSIONS);
  } finally {
    await database.close();
  }
  return prefix;
}

declare module "vitest" {
  export interface ProvidedContext {
    templatePath: string;
    /** The migrated template as an embedded data directory on disk (closed, never opened again). */
    templateDataDir: string;
  }
}

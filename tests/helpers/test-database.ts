import { cpSync, readFileSync } from "node:fs";
import pg from "pg";
import { inject } from "vitest";
import { createPgDatabase } from "../../lib/db/pg";
import { createPgliteDatabase } from "../../lib/db/pglite";
import type { Database, QueryHook } from "../../lib/db/types";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";

/**
 * Where the tests' databases live. Unset (`npm test`): each one is a fresh embedded PGlite, a
 * copy of a migrated template dump. Set (`npm run test:pg`, scripts/test-postgres.sh): a
 * superuser URL of a PostgreSQL server with pgvector; each test database is then a database of
 * its own on that server, made with `CREATE DATABASE ... TEMPLATE` from one migrated in the
 * global setup, reached through node-postgres (or, for the edge suites, through the local Neon
 * HTTP stand-in backed by it). The same test files run unchanged either way.
 */
export function testPgUrl(): string | undefined {
  return process.env.TEST_PG_URL || undefined;
}

/**
 * The URL of database `name` on the server of TEST_PG_URL, or behind another URL of it (a pooler's):
 * same user, host, port, options.
 */
export function serverDatabaseUrl(name: string, base = requiredPgUrl()): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

function requiredPgUrl(): string {
  const url = testPgUrl();
  if (!url) throw new Error("TEST_PG_URL is not set");
  return url;
}

/** Runs `work` on one connection to the server's maintenance database (TEST_PG_URL's own). */
export async function onServer<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: requiredPgUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The run's template database: `<prefix>template`; the run's other databases start with `<prefix>`. */
export function templateDatabaseName(prefix: string): string {
  return `${prefix}template`;
}

let counter = 0;

/**
 * A new database on the server, a copy of the run's migrated template, or empty (`empty`: a
 * server process migrates it at start). Returns its name and URL; `dropServerDatabase` removes it
 * (the global teardown removes any left over).
 *
 * A copy does not take the template's own settings (`ALTER DATABASE ... SET`, which migration 0003
 * makes: hnsw.iterative_scan), so they are copied here, as migrating the database would set them.
 */
export async function newServerDatabase(options: { empty?: boolean } = {}): Promise<{ name: string; url: string }> {
  const prefix = inject("pgDatabasePrefix");
  const name = `${prefix}${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
  const template = templateDatabaseName(prefix);
  await onServer(async (client) => {
    if (options.empty) return client.query(`CREATE DATABASE ${quoteIdent(name)}`);
    await client.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${quoteIdent(template)}`);
    const { rows } = await client.query<{ setting: string }>(
      `SELECT unnest(s.setconfig) AS setting FROM pg_db_role_setting s
         JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = $1 AND s.setrole = 0`,
      [template],
    );
    for (const { setting } of rows) {
      const at = setting.indexOf("=");
      await client.query(
        `ALTER DATABASE ${quoteIdent(name)} SET ${quoteIdent(setting.slice(0, at))} TO ${quoteLiteral(setting.slice(at + 1))}`,
      );
    }
  });
  return { name, url: serverDatabaseUrl(name) };
}

const quoteLiteral = (value: string) => `'${value.replaceAll("'", "''")}'`;

/** Drops a test database, closing any connection still open to it. */
export async function dropServerDatabase(name: string): Promise<void> {
  await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`));
}

/** Drops every database of a run (its template included). */
export async function dropServerDatabases(prefix: string): Promise<void> {
  await onServer(async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE starts_with(datname, $1)",
      [prefix],
    );
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(datname)} WITH (FORCE)`);
  });
}

/**
 * A fresh copy of the migrated template, as a test service or an edge worker's stand-in uses it:
 * PGlite from the template dump, or a new server database through node-postgres (dropped when
 * the database is closed).
 */
export async function openTestDatabase(options: { onQuery?: QueryHook } = {}): Promise<Database> {
  if (!testPgUrl()) {
    const template = new Blob([readFileSync(inject("templatePath"))]);
    return createPgliteDatabase({ loadDataDir: template, onQuery: options.onQuery });
  }
  const { name, url } = await newServerDatabase();
  const database = createPgDatabase(url, options);
  return {
    ...database,
    async close() {
      await database.close();
      await dropServerDatabase(name);
    },
  };
}

/**
 * The environment of a child `npm start` (or command) on an embedded data directory of its own,
 * `dir` (it must not exist), that already holds the migrated template: the tests' vector size, no
 * users. It opens in about a second, where an empty directory or memory:// first runs initdb and
 * every migration (about 8 s of CPU, twice that beside another suite). The suites about a first
 * start (the quick start, the command line's first run) start empty instead.
 */
export function migratedPgliteEnv(dir: string): { PGLITE_DIR: string; EMBEDDING_DIMENSIONS: string } {
  cpSync(inject("templateDataDir"), dir, { recursive: true });
  return { PGLITE_DIR: dir, EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) };
}

/**
 * The environment a child `npm start` needs for a database of its own: with TEST_PG_URL, a new
 * empty server database as DATABASE_URL, which the process migrates from empty at its first start
 * (`drop` removes it); otherwise a copy of the migrated template at `pgliteDir` (migratedPgliteEnv).
 */
export async function serverProcessDatabase(
  pgliteDir: string,
): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> {
  if (!testPgUrl()) return { env: migratedPgliteEnv(pgliteDir), drop: async () => {} };
  const { name, url } = await newServerDatabase({ empty: true });
  return { env: { DATABASE_URL: url }, drop: () => dropServerDatabase(name) };
}

declare module "vitest" {
  export interface ProvidedContext {
    /** With TEST_PG_URL: the prefix of this run's database names on the server. */
    pgDatabasePrefix: string;
  }
}

import { spawnSync } from "node:child_process";
import pg from "pg";

/**
 * The bench on a PostgreSQL server (`--database-url`): each unit seeds and queries a database of
 * its own, created on that server for it and dropped after it. The URL's own database is only
 * where the bench connects to create and drop them (as `createdb` connects to `postgres`); the
 * bench writes nothing there, and it refuses a URL whose database holds tables (an application's
 * database, given by mistake) unless the bench made it. Databases are dropped only by the name
 * this process made, and only when they carry the bench's comment.
 */
export const BENCH_DATABASE_PREFIX = "memsvc_bench_";
/** COMMENT ON DATABASE of every database the bench makes: what marks it as the bench's. */
export const BENCH_DATABASE_COMMENT = "memory-service bench: a scratch database, dropped after its run";

export interface ServerDatabase {
  name: string;
  url: string;
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The URL without its password, for the results and the log. */
export function redactedUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = "***";
  return u.toString();
}

/** The URL of database `name` on the server of `serverUrl` (same user, host, port, options). */
export function databaseUrlOf(serverUrl: string, name: string): string {
  const u = new URL(serverUrl);
  u.pathname = `/${encodeURIComponent(name)}`;
  return u.toString();
}

async function onServer<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * Why the URL's own database is not for the bench, or undefined when it is: it holds tables (outside
 * the system schemas) and is not a database the bench made.
 */
export async function refusalOf(serverUrl: string): Promise<string | undefined> {
  return onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ name: string; tables: number; comment: string | null }>(
      `SELECT current_database() AS name,
         (SELECT count(*)::int FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
             AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%') AS tables,
         shobj_description((SELECT oid FROM pg_database WHERE datname = current_database()), 'pg_database') AS comment`,
    );
    const [{ name, tables, comment }] = rows;
    if (tables === 0 || comment === BENCH_DATABASE_COMMENT) return undefined;
    return (
      `--database-url: database "${name}" holds ${tables} table${tables > 1 ? "s" : ""} and was not made by the bench; ` +
      "give the URL of a server's maintenance database (e.g. /postgres): the bench makes a database of its own there"
    );
  });
}

/** A new, empty database for one bench unit on the server of `serverUrl` (refused: see refusalOf). */
export async function createBenchDatabase(serverUrl: string): Promise<ServerDatabase> {
  const refusal = await refusalOf(serverUrl);
  if (refusal) throw new Error(refusal);
  const name = `${BENCH_DATABASE_PREFIX}${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await onServer(serverUrl, async (client) => {
    await client.query(`CREATE DATABASE ${quoteIdent(name)}`);
    await client.query(`COMMENT ON DATABASE ${quoteIdent(name)} IS '${BENCH_DATABASE_COMMENT}'`);
  });
  return { name, url: databaseUrlOf(serverUrl, name) };
}

/** Drops a database this process made (its connections closed first); any other name is refused. */
export async function dropBenchDatabase(serverUrl: string, database: ServerDatabase): Promise<void> {
  if (!database.name.startsWith(`${BENCH_DATABASE_PREFIX}${process.pid}_`)) {
    throw new Error(`not a database of this bench process: ${database.name}`);
  }
  await onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ comment: string | null }>(
      "SELECT shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE datname = $1",
      [database.name],
    );
    if (rows.length === 0) return;
    if (rows[0].comment !== BENCH_DATABASE_COMMENT) throw new Error(`${database.name} is not the bench's: not dropped`);
    await client.query(`DROP DATABASE ${quoteIdent(database.name)} WITH (FORCE)`);
  });
}

/** Databases of earlier bench runs still on the server (a run killed before it could drop its own). */
export async function leftoverBenchDatabases(serverUrl: string): Promise<string[]> {
  return onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE starts_with(datname, $1) AND shobj_description(oid, 'pg_database') = $2 ORDER BY 1",
      [BENCH_DATABASE_PREFIX, BENCH_DATABASE_COMMENT],
    );
    return rows.map((r) => r.datname);
  });
}

/** What the results say of the server: its version, pgvector's, and the settings that weigh on the figures. */
export interface ServerFacts {
  kind: "postgres";
  url: string;
  version: string;
  pgvector: string | null;
  settings: Record<string, string>;
}

const REPORTED_SETTINGS = [
  "shared_buffers",
  "effective_cache_size",
  "work_mem",
  "maintenance_work_mem",
  "max_parallel_maintenance_workers",
  "max_parallel_workers_per_gather",
  "synchronous_commit",
  "fsync",
  "random_page_cost",
];

export async function serverFacts(serverUrl: string): Promise<ServerFacts> {
  return onServer(serverUrl, async (client) => {
    const { rows } = await client.query<{ version: string; pgvector: string | null }>(
      `SELECT current_setting('server_version') AS version,
         (SELECT default_version FROM pg_available_extensions WHERE name = 'vector') AS pgvector`,
    );
    const settings: Record<string, string> = {};
    for (const name of REPORTED_SETTINGS) {
      const { rows: r } = await client.query<{ value: string }>("SELECT current_setting($1) AS value", [name]);
      settings[name] = r[0].value;
    }
    return { kind: "postgres", url: redactedUrl(serverUrl), ...rows[0], settings };
  });
}

/**
 * What the bench did before its "cold" measurement, besides closing every connection of the
 * service and opening new ones (so no backend's caches, prepared plans or session state
 * survive: more than DISCARD ALL). With BENCH_PG_RESTART (a shell command; scripts/bench-postgres.sh
 * sets it), the command is run: it restarts the cluster (shared buffers empty) and, if it says so
 * in BENCH_PG_DROPS_CACHES=1, dropped the OS page cache too. Without it, shared buffers and the
 * OS cache stay as they were.
 */
export interface ColdReset {
  clusterRestarted: boolean;
  osCacheDropped: boolean;
  newConnections: true;
  seconds: number;
}

/** Runs the cold reset's command if there is one (the service's connections must be closed first). */
export function coldReset(env: NodeJS.ProcessEnv = process.env): ColdReset {
  const started = performance.now();
  const command = env.BENCH_PG_RESTART;
  if (command) {
    const run = spawnSync("sh", ["-c", command], { stdio: ["ignore", "inherit", "inherit"] });
    if (run.status !== 0) throw new Error(`BENCH_PG_RESTART failed (exit ${run.status ?? run.signal}): ${command}`);
  }
  return {
    clusterRestarted: Boolean(command),
    osCacheDropped: Boolean(command) && env.BENCH_PG_DROPS_CACHES === "1",
    newConnections: true,
    seconds: (performance.now() - started) / 1000,
  };
}

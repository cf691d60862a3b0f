import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { dropServerDatabase, newServerDatabase } from "./test-database";

/**
 * `count` connections to a database of their own on the test server (TEST_PG_URL), for suites
 * that run statements in concurrent transactions (PGlite has one connection). The last one is
 * the observer: `waitsForLock` watches the others through it. Call inside a describe that runs
 * only with a server; `clients` is filled before the describe's own beforeAll hooks run.
 */
export function useServerConnections(count: number) {
  const dialect = new PgDialect();
  const clients: pg.Client[] = [];
  let name: string | undefined;
  let url: string | undefined;

  beforeAll(async () => {
    const database = await newServerDatabase();
    name = database.name;
    url = database.url;
    for (let i = 0; i < count; i++) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      clients.push(client);
    }
  });
  afterAll(async () => {
    for (const client of clients) await client.end();
    if (name) await dropServerDatabase(name);
  });

  const run = (client: pg.Client, q: SQL) => {
    const { sql: text, params } = dialect.sqlToQuery(q);
    return client.query(text, params);
  };

  /** Polls through the observer until a backend that `where` picks waits for a lock. */
  async function untilLockWait(where: string, params: unknown[]) {
    const observer = clients[clients.length - 1];
    for (let i = 0; i < 500; i++) {
      const { rows } = await observer.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND ${where} LIMIT 1`,
        params,
      );
      if (rows.length > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error("the statement never waited for a lock");
  }

  /** Waits until `client`'s backend waits for a lock (its statement is blocked, not finished). */
  async function waitsForLock(client: pg.Client) {
    const pid = (await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    return () => untilLockWait("pid = $1", [pid]);
  }

  /** Waits until some backend of the database waits for a lock (a pool's statement, whose pid is unknown). */
  const someoneWaitsForLock = () => untilLockWait("datname = current_database()", []);

  /** The database's URL, for a pool of the service's own beside the clients. */
  const databaseUrl = () => url as string;

  return { clients, run, waitsForLock, someoneWaitsForLock, databaseUrl };
}

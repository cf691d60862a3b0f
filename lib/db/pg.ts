import { drizzle } from "drizzle-orm/node-postgres";
import pg from "pg";
import { withFastCompile } from "./compile";
import { LeadGate, type LeadingStatement, leadFirstLog } from "./leading";
import * as schema from "./schema";
import { tracedQuery } from "./traced";
import {
  batchInTransaction,
  type Database,
  type Db,
  type LeadingDatabase,
  loggerFrom,
  type QueryHook,
  requestDatabase,
} from "./types";

/**
 * The pool's connection settings: the URL and its own parameters, nothing in the startup packet
 * beside them. A pooler in front of the server (PgBouncer, a managed service's pooler) refuses a
 * connection whose startup `options` name a setting it does not track ("unsupported startup
 * parameter"), so settings the service needs on every session (JIT off, the HNSW scan) are the
 * database's own, set by its migrations (0003, 0021).
 */
export function pgPoolConfig(url: string): pg.PoolConfig {
  return { connectionString: url, max: 10 };
}

/** Any other Postgres URL: a node-postgres pool. */
export function createPgDatabase(url: string, options: { onQuery?: QueryHook } = {}): Database {
  const pool = new pg.Pool(pgPoolConfig(url));
  // An idle connection the server ends (a restart, a failover, an administrator's terminate, a
  // dropped database) is reported on the pool; without a listener Node.js would end the process.
  // The pool discards that connection and opens another for the next query, and a query in
  // flight gets the error itself, so a warning is all there is to do.
  // (console: lib/log sits above lib/db in the folders' import order.)
  // The line has lib/log's shape (level, message, fields, time), so log shippers parse it alike.
  pool.on("error", (err) =>
    console.log(
      JSON.stringify({
        level: "warn",
        message: "database connection lost while idle",
        error: err.message,
        time: new Date().toISOString(),
      }),
    ),
  );
  // A span per statement when tracing is on; the request views below call this one too.
  pool.query = tracedQuery(pool.query) as pg.Pool["query"];
  const db = withFastCompile(drizzle({ client: pool, schema, logger: loggerFrom(options.onQuery) })) as unknown as Db;
  return {
    db,
    kind: "pg",
    batch: (build) => batchInTransaction(db, build),
    withLeading: (lead) => leadingPool(pool, lead, options.onQuery),
    close: () => pool.end(),
    // For the local Neon HTTP stand-in backed by a server (dev/neon-http-endpoint.ts).
    ...({ pool } as object),
  };
}

export function pgPoolOf(database: Database): pg.Pool {
  const pool = (database as unknown as { pool?: pg.Pool }).pool;
  if (!pool) throw new Error("not a node-postgres database");
  return pool;
}

/**
 * The lead goes just before the request's first statement, on the pool: one more round trip to a
 * server that is usually beside the host (unlike Neon over HTTP, where it rides along).
 */
function leadingPool(pool: pg.Pool, lead: LeadingStatement, onQuery: QueryHook | undefined): LeadingDatabase {
  const { logLead, logger } = leadFirstLog(lead, onQuery);
  const gate = new LeadGate(lead, async (query) => {
    logLead(query);
    return (await pool.query(query.sql, query.params)).rows;
  });
  // Still a Pool to drizzle (it checks, to run a transaction on one checked-out connection).
  const view: pg.Pool = Object.create(pool);
  view.query = (async (...args: Parameters<pg.Pool["query"]>) => {
    await gate.settle();
    return (pool.query as (...a: unknown[]) => unknown)(...args);
  }) as pg.Pool["query"];
  view.connect = (async () => {
    await gate.settle();
    return pool.connect();
  }) as pg.Pool["connect"];
  // Without the relational schema (`db.query`, unused here): building it costs ~130 µs a request.
  const db = withFastCompile(drizzle({ client: view, logger })) as unknown as Db;
  return requestDatabase({ db, kind: "pg", batch: (build) => batchInTransaction(db, build) }, gate);
}

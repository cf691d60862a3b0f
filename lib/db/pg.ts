import { drizzle } from "drizzle-orm/node-postgres";
import pg from "pg";
import * as schema from "./schema";
import { batchInTransaction, type Database, type Db, loggerFrom, type QueryHook } from "./types";

/** Any other Postgres URL: a node-postgres pool. */
export function createPgDatabase(url: string, options: { onQuery?: QueryHook } = {}): Database {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const db = drizzle({ client: pool, schema, logger: loggerFrom(options.onQuery) }) as unknown as Db;
  return {
    db,
    kind: "pg",
    batch: (build) => batchInTransaction(db, build),
    close: () => pool.end(),
  };
}

import type { BatchItem } from "drizzle-orm/batch";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import type * as schema from "./schema";

/** The one query layer: every driver's drizzle instance is a PgDatabase over the same schema. */
export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

export type DriverKind = "pglite" | "neon" | "pg";

/** Called once per SQL statement sent; used to count round trips in tests and benchmarks. */
export type QueryHook = (sql: string, params: unknown[]) => void;

export interface Database {
  db: Db;
  kind: DriverKind;
  /**
   * Run statements atomically in one round trip where the driver allows it (Neon's HTTP batch,
   * which is a transaction), otherwise in one transaction. Prefer a single statement (CTE).
   */
  batch(build: (db: Db) => BatchItem<"pg">[]): Promise<unknown[]>;
  close(): Promise<void>;
}

export async function batchInTransaction(db: Db, build: (db: Db) => BatchItem<"pg">[]) {
  return db.transaction(async (tx) => {
    const results: unknown[] = [];
    for (const query of build(tx as unknown as Db)) results.push(await query);
    return results;
  });
}

export function loggerFrom(onQuery: QueryHook | undefined) {
  return onQuery ? { logQuery: (query: string, params: unknown[]) => onQuery(query, params) } : false;
}

import type { SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { type PgDatabase, PgDialect, type PgQueryResultHKT } from "drizzle-orm/pg-core";
import { withFastCompile } from "./compile";
import type { LeadingStatement } from "./leading";
import type * as schema from "./schema";
import { tracedTransaction } from "./traced";

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
  /**
   * This database as one request sees it when `lead` must run before the request's work: in the
   * same round trip as its first statement on Neon (one HTTP transaction), just before it on the
   * other drivers (in-process PGlite, or a pooled connection). See lib/db/leading.ts.
   */
  withLeading(lead: LeadingStatement): LeadingDatabase;
}

export interface LeadingDatabase extends Database {
  /** The lead's outcome (sent alone if no statement took it along); throws its refusal. */
  settle(): Promise<void>;
}

export async function batchInTransaction(db: Db, build: (db: Db) => BatchItem<"pg">[]) {
  return tracedTransaction(() =>
    db.transaction(async (tx) => {
      const results: unknown[] = [];
      for (const query of build(tx as unknown as Db)) results.push(await query);
      return results;
    }),
  );
}

/** The per-request view `withLeading` returns: a lead already bound, so no second one. */
export function requestDatabase(
  view: Pick<Database, "db" | "kind" | "batch">,
  gate: { settle(): Promise<void> },
): LeadingDatabase {
  return {
    ...view,
    withLeading: () => {
      throw new Error("this request's database already has its leading statement");
    },
    close: async () => {},
    settle: () => gate.settle(),
  };
}

/**
 * The project a request works in: its id, or (for a read whose API key is checked in the same
 * round trip, lib/auth.ts) SQL that finds it. Only ever interpolated into SQL.
 */
export type ProjectRef = string | SQL;

/** A raw statement as the drivers send it: text with $n placeholders, and its parameters. */
export function compiled(query: SQL): { sql: string; params: unknown[] } {
  return dialect.sqlToQuery(query);
}
const { dialect } = withFastCompile({ dialect: new PgDialect() });

export function loggerFrom(onQuery: QueryHook | undefined) {
  return onQuery ? { logQuery: (query: string, params: unknown[]) => onQuery(query, params) } : false;
}

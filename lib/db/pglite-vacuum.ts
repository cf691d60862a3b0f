import { sql } from "drizzle-orm";
import type { Logger } from "../log";
import { rowsOf } from "./rows";
import type { Db } from "./types";

/**
 * Dead rows a table may hold before it is vacuumed: this many plus VACUUM_SCALE of its live rows
 * (a server's autovacuum_vacuum_threshold and autovacuum_vacuum_scale_factor, their defaults).
 */
export const VACUUM_THRESHOLD = 50;
export const VACUUM_SCALE = 0.2;
/**
 * Rows inserted since the last vacuum before an append-only table is vacuumed (and so frozen a
 * part at a time rather than all at once at FREEZE_MAX_AGE): autovacuum_vacuum_insert_threshold
 * and autovacuum_vacuum_insert_scale_factor, their defaults.
 */
export const INSERT_THRESHOLD = 1_000;
export const INSERT_SCALE = 0.2;
/**
 * Transactions since a table's oldest unfrozen row past which it is vacuumed whatever else it
 * holds: autovacuum_freeze_max_age, its default. Postgres counts transactions in 2^31 before
 * they wrap around; a row older than that would turn invisible.
 */
export const FREEZE_MAX_AGE = 200_000_000;

/**
 * The embedded database runs one statement at a time, so a request waits behind each maintenance
 * statement (VACUUM, ANALYZE) issued before its own next one. Issued back to back, a request of
 * four statements waited behind four tables' maintenance (a soak review saw no request complete
 * for 5-9 s while the tables were vacuumed and analysed). This pause after each lets the requests
 * waiting then run all their statements first; each then waits for one table's statement at most.
 */
export const MAINTENANCE_PAUSE_MS = 25;

/** The milliseconds of eachTableInTurn's tables, added up. */
export const total = (ms: Record<string, number>) => Object.values(ms).reduce((a, b) => a + b, 0);

/**
 * Runs `statement` for each table in turn with MAINTENANCE_PAUSE_MS between them, and answers how
 * long each took (ms): the log says which tables cost the time.
 */
export async function eachTableInTurn(tables: string[], statement: (table: string) => Promise<unknown>) {
  const took: Record<string, number> = {};
  for (const [i, table] of tables.entries()) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, MAINTENANCE_PAUSE_MS));
    const started = performance.now();
    await statement(table);
    took[table] = Math.round(performance.now() - started);
  }
  return took;
}

/** What the statistics views and the catalog say of a table, as vacuumTables reads them. */
export interface TableActivity {
  /** As `regclass` prints it: quoted where needed, schema-qualified outside the search path. */
  table: string;
  liveRows: number;
  deadRows: number;
  insertedSinceVacuum: number;
  /** Transactions since the table's oldest unfrozen row (`age(relfrozenxid)`). */
  xidAge: number;
}

/**
 * The tables a server's autovacuum would vacuum now, by its default rules: dead rows past
 * VACUUM_THRESHOLD + VACUUM_SCALE × live rows, rows inserted since the last vacuum past
 * INSERT_THRESHOLD + INSERT_SCALE × live rows, or a transaction age past FREEZE_MAX_AGE.
 */
export function tablesToVacuum(tables: TableActivity[], freezeMaxAge = FREEZE_MAX_AGE): string[] {
  return tables
    .filter(
      (t) =>
        t.deadRows > VACUUM_THRESHOLD + VACUUM_SCALE * t.liveRows ||
        t.insertedSinceVacuum > INSERT_THRESHOLD + INSERT_SCALE * t.liveRows ||
        t.xidAge > freezeMaxAge,
    )
    .map((t) => t.table);
}

/**
 * The embedded database runs Postgres in single-user mode, where no autovacuum runs. Without a
 * vacuum its tables keep every row an update or a delete left behind (each message's row is
 * rewritten once when its thread is embedded; every request's key stamp, every job claim), and
 * no row is ever frozen: every request spends a transaction id (two for a write), and past 2^31
 * of them an unfrozen row's id would read as in the future, its row invisible. Single-user mode
 * does not stop writes before that as a server would; it only warns. So the host vacuums as
 * autovacuum would (tablesToVacuum), every table of the database, the system catalogs' too
 * (ANALYZE and VACUUM rewrite rows of pg_class and pg_statistic, which must be frozen as well),
 * one statement per table, with FREEZE: every page a vacuum visits is left frozen, so later ones
 * skip it and no table waits for one long pass at the freeze age. Each VACUUM holds the database
 * while it runs (requests wait for it). `freezeMaxAge` is for tests. Returns the tables vacuumed.
 */
export async function vacuumTables(
  db: Db,
  log: Logger,
  { freezeMaxAge = FREEZE_MAX_AGE }: { freezeMaxAge?: number } = {},
): Promise<string[]> {
  // A TOAST table is vacuumed with its table.
  const activity = rowsOf<{ table: string; live: string; dead: string; inserted: string; age: string }>(
    await db.execute(sql`
      SELECT c.oid::regclass::text AS table, coalesce(s.n_live_tup, 0) AS live, coalesce(s.n_dead_tup, 0) AS dead,
        coalesce(s.n_ins_since_vacuum, 0) AS inserted, age(c.relfrozenxid) AS age
      FROM pg_class c LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
      WHERE c.relkind IN ('r', 'm')`),
  ).map((r) => ({
    table: r.table,
    liveRows: Number(r.live),
    deadRows: Number(r.dead),
    insertedSinceVacuum: Number(r.inserted),
    xidAge: Number(r.age),
  }));
  const tables = tablesToVacuum(activity, freezeMaxAge);
  if (tables.length === 0) return [];
  // The name as regclass prints it, quoted by Postgres itself.
  const ms = await eachTableInTurn(tables, (table) => db.execute(sql.raw(`VACUUM (FREEZE) ${table}`)));
  log.info("vacuumed the tables that needed it", { tables, ms: total(ms), msByTable: ms });
  return tables;
}

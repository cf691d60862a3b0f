import { sql } from "drizzle-orm";
import type { Logger } from "../log";
import { eachTableInTurn, total } from "./pglite-vacuum";
import { rowsOf } from "./rows";
import type { Db } from "./types";

/**
 * How much a table grows, as a share of its pages when its statistics were last taken, before
 * they are taken again: about what a server's autovacuum does by default (10% of rows plus 50),
 * in pages, which grow a little behind the rows.
 */
export const GROWTH_WORTH_NEW_STATISTICS = 0.2;
/** And at least this many pages (8 kB each), so that a small table is not analysed on every write. */
export const PAGES_WORTH_NEW_STATISTICS = 8;
/**
 * Rows inserted, updated or deleted since a table's last ANALYZE before it is analysed again: this
 * many plus ANALYZE_SCALE of its rows (a server's autovacuum_analyze_threshold and
 * autovacuum_analyze_scale_factor, their defaults).
 */
export const ANALYZE_THRESHOLD = 50;
export const ANALYZE_SCALE = 0.1;
/** How often the embedded host looks (one catalog query; ANALYZE only for the tables that grew). */
export const STATISTICS_CHECK_MS = 10 * 60_000;

/**
 * A table's size now and as the catalog last recorded it (relpages: set by ANALYZE, VACUUM and
 * CREATE INDEX; 0 if never), and the rows changed since its last ANALYZE.
 */
export interface TableSize {
  table: string;
  pages: number;
  pagesWhenAnalysed: number;
  /** pg_statistic holds rows for it: it was analysed since it last held rows. */
  analysed: boolean;
  /** Rows in the catalog's estimate (reltuples), and rows changed since the last ANALYZE (n_mod_since_analyze). */
  rows: number;
  changedSinceAnalysed: number;
}

/**
 * The tables whose planner statistics are missing or stale: never analysed and holding rows,
 * changed since by ANALYZE_THRESHOLD + ANALYZE_SCALE of their rows (autovacuum's rule, counted
 * by the statistics views, which a crash resets), or grown by GROWTH_WORTH_NEW_STATISTICS (and
 * PAGES_WORTH_NEW_STATISTICS) since the catalog last recorded their size. The host's VACUUM
 * (lib/db/pglite-vacuum.ts) records that size too, so growth alone would miss a table vacuumed
 * each period as it grows.
 */
export function tablesToAnalyze(sizes: TableSize[]): string[] {
  return sizes
    .filter(({ pages, pagesWhenAnalysed, analysed, rows, changedSinceAnalysed }) => {
      if (pages === 0) return false;
      if (!analysed) return true;
      if (changedSinceAnalysed > ANALYZE_THRESHOLD + ANALYZE_SCALE * Math.max(rows, 0)) return true;
      const grown = pages - pagesWhenAnalysed;
      return grown >= PAGES_WORTH_NEW_STATISTICS && grown >= pagesWhenAnalysed * GROWTH_WORTH_NEW_STATISTICS;
    })
    .map((s) => s.table);
}

/**
 * The embedded database has no autovacuum, so without this its planner never has statistics: it
 * guesses every `project_id = … AND dataset = …` a few rows and plans by that guess (a lone
 * dataset's recall of 10,000 facts ran 0.5-1 ms slower, a plain nearest-facts query 30 ms instead
 * of 1; bench/RESULTS.md), and the benchmarks, which analyse after seeding, measured a database
 * no user had. Takes the statistics of the tables tablesToAnalyze names, one ANALYZE statement
 * each, so requests run between them; plans made before are made again (ANALYZE invalidates them).
 * Returns the tables analysed.
 */
export async function analyzeGrownTables(db: Db, log: Logger): Promise<string[]> {
  const sizes = rowsOf<{
    table: string;
    pages: number | string;
    analysed_pages: number;
    analysed: boolean;
    rows: number | string;
    changed: number | string | null;
  }>(
    await db.execute(sql`
      SELECT c.relname AS table, pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
        c.relpages AS analysed_pages, EXISTS (SELECT 1 FROM pg_statistic s WHERE s.starelid = c.oid) AS analysed,
        c.reltuples AS rows, pg_stat_get_mod_since_analyze(c.oid) AS changed
      FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`),
  ).map((r) => ({
    table: r.table,
    pages: Number(r.pages),
    pagesWhenAnalysed: Number(r.analysed_pages),
    analysed: r.analysed,
    rows: Number(r.rows),
    changedSinceAnalysed: Number(r.changed ?? 0),
  }));
  const tables = tablesToAnalyze(sizes);
  if (tables.length === 0) return [];
  const ms = await eachTableInTurn(tables, (table) => db.execute(sql`ANALYZE ${sql.identifier(table)}`));
  log.info("took the planner's statistics of the tables that grew", { tables, ms: total(ms), msByTable: ms });
  return tables;
}

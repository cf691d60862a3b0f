import { type SQL, sql } from "drizzle-orm";

/**
 * A statement marked to be planned once for all its parameter values (Postgres's generic plan)
 * where the driver keeps statements prepared: the embedded database (lib/db/pglite-statements.ts).
 * Recall's statement spent ~5 ms of a ~17-20 ms call at 10,000 facts being planned again for
 * every query; its generic plan runs as fast (bench/RESULTS.md, the night of 2026-11-27). Only
 * for a statement whose every join is safe without its values: a lateral index lookup rather
 * than a join a planner might turn into a hash of a whole table. Elsewhere the mark is an SQL
 * comment.
 */
export const GENERIC_PLAN_HINT = "/* plan: generic */ ";

/**
 * Runs of a generic-plan statement before it is planned again. The plan is made from the tables'
 * sizes at the time (the embedded database runs no autovacuum or ANALYZE to invalidate it), so a
 * plan made when a table was small is replaced after this many runs; planning once per 50 runs
 * costs ~0.1 ms a run.
 */
export const GENERIC_PLAN_RUNS = 50;

export function withGenericPlan(statement: SQL): SQL {
  return sql`${sql.raw(GENERIC_PLAN_HINT)}${statement}`;
}

export function wantsGenericPlan(text: string): boolean {
  return text.startsWith(GENERIC_PLAN_HINT);
}

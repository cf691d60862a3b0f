import { count, type SQL, sql } from "drizzle-orm";
import type { PgTable } from "drizzle-orm/pg-core";
import type { Db } from "./types";

export interface OffsetPage {
  limit: number;
  offset: number;
}

/**
 * A dashboard list page and the list's total in one statement: the total rides along each row as
 * a scalar subquery. Only a page past the end (no row to carry it) costs a second, counting one,
 * which also reads `found` (`owner`, an integer expression: 0 when the list's owner, say its
 * project, does not exist; see requireProject): a row on the page proves its owner by its foreign
 * key, an empty page does not.
 */
export async function pageWithTotal<T extends PgTable>(
  db: Db,
  table: T,
  where: SQL | undefined,
  orderBy: SQL[],
  page: OffsetPage,
  owner: SQL<number> = sql<number>`1`,
): Promise<{ rows: T["$inferSelect"][]; total: number; found: number }> {
  const filter = where ?? sql`true`;
  const found = await db
    .select({ row: table as PgTable, total: sql<number>`(SELECT count(*) FROM ${table} WHERE ${filter})::int` })
    .from(table as PgTable)
    .where(filter)
    .orderBy(...orderBy)
    .limit(page.limit)
    .offset(page.offset);
  if (found.length > 0) {
    return { rows: found.map((f) => f.row as T["$inferSelect"]), total: Number(found[0].total), found: 1 };
  }
  const [empty] = await db
    .select({ total: count(), owner: sql<number>`(${owner})::int` })
    .from(table as PgTable)
    .where(filter);
  return { rows: [], total: empty.total, found: Number(empty.owner) };
}

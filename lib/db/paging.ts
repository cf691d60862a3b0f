import { count, type SQL, sql } from "drizzle-orm";
import type { PgTable } from "drizzle-orm/pg-core";
import type { Db } from "./types";

export interface OffsetPage {
  limit: number;
  offset: number;
}

/**
 * A dashboard list page and the list's total in one statement: the total rides along each row as
 * a scalar subquery. Only a page past the end (no row to carry it) costs a second, counting one.
 */
export async function pageWithTotal<T extends PgTable>(
  db: Db,
  table: T,
  where: SQL | undefined,
  orderBy: SQL[],
  page: OffsetPage,
): Promise<{ rows: T["$inferSelect"][]; total: number }> {
  const filter = where ?? sql`true`;
  const found = await db
    .select({ row: table as PgTable, total: sql<number>`(SELECT count(*) FROM ${table} WHERE ${filter})::int` })
    .from(table as PgTable)
    .where(filter)
    .orderBy(...orderBy)
    .limit(page.limit)
    .offset(page.offset);
  if (found.length > 0) {
    return { rows: found.map((f) => f.row as T["$inferSelect"]), total: Number(found[0].total) };
  }
  const [{ total }] = await db
    .select({ total: count() })
    .from(table as PgTable)
    .where(filter);
  return { rows: [], total };
}

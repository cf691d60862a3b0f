import { z } from "zod";
import { parsePgTimestamp } from "./timestamps";

/**
 * Rows of a raw `db.execute()` result, whatever the driver's result shape. The type parameter is
 * an unchecked cast (tests read their own probes with it); the domain reads rows with
 * `parsedRowsOf`, or `rowsOf(result)` when it only counts them.
 */
export function rowsOf<T = unknown>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

/** Timestamps from raw SQL come back as Date (pglite, pg) or Postgres's text (Neon over HTTP). */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : parsePgTimestamp(String(value));
}

export function toIso(value: unknown): string | null {
  return toDate(value)?.toISOString() ?? null;
}

/** A json/jsonb value from raw SQL: parsed by pglite and pg, text over Neon's HTTP driver. */
export function jsonOf<T>(value: T | string): T {
  return typeof value === "string" ? (JSON.parse(value) as T) : value;
}

/**
 * Rows of a raw `db.execute()` result checked against `schema` (its output type is the row type,
 * so no hand-written cast). A row of another shape is a fault of the service, not of the request:
 * a plain Error (a 500), never the ZodError that onError would answer 400 with.
 */
export function parsedRowsOf<S extends z.ZodType>(schema: S, result: unknown): z.output<S>[] {
  return rowsOf(result).map((row) => {
    const parsed = schema.safeParse(row);
    if (!parsed.success) throw new Error(`Unexpected row from the database: ${z.prettifyError(parsed.error)}`);
    return parsed.data;
  });
}

/** A count or integer column: a number from pglite and Neon, a string for bigint. */
export const dbInt = z.union([z.number(), z.string()]).transform(Number);
/** A numeric, real or float column: numeric arrives as a string from every driver. */
export const dbNumber = z.union([z.number(), z.string()]).transform(Number);
/** A timestamp column: a Date from pglite, a string over Neon's HTTP driver. */
export const dbTimestamp = z.union([z.date(), z.string()]).nullable();
/** A timestamp column that is never null (a NOT NULL column, or a value the statement always has). */
export const dbTimestampSet = z.union([z.date(), z.string()]);

/**
 * A json/jsonb column (or a json_agg / row_to_json value) checked against `schema`: parsed by
 * pglite and pg, text over Neon's HTTP driver (the same rule as `jsonOf`).
 */
export function dbJson<S extends z.ZodType>(schema: S) {
  return z.preprocess(parseJsonText, schema);
}

/** Text that is not JSON is left as it is, for the schema to reject (a 500, not a SyntaxError's 400). */
function parseJsonText(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

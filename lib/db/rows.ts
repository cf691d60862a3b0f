/** Rows of a raw `db.execute()` result, whatever the driver's result shape. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

/** Timestamps from raw SQL come back as Date (pglite, pg) or string (Neon over HTTP). */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}

export function toIso(value: unknown): string | null {
  return toDate(value)?.toISOString() ?? null;
}

/** A json/jsonb value from raw SQL: parsed by pglite and pg, text over Neon's HTTP driver. */
export function jsonOf<T>(value: T | string): T {
  return typeof value === "string" ? (JSON.parse(value) as T) : value;
}

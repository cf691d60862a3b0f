/**
 * The offset of the last page that has rows, 0 when there are none: where a page left empty (its
 * last rows deleted) or past the end (an `?offset=` beyond the total) goes back to.
 */
export function lastPageOffset(total: number, limit: number): number {
  return total > 0 ? Math.floor((total - 1) / limit) * limit : 0;
}

/** The largest `offset` the server takes (functions/schemas/inputs.ts): past it, a 400. */
export const MAX_OFFSET = 1_000_000;

/**
 * A route's `offset`, a non-negative integer (0 when absent or malformed), at most MAX_OFFSET: a
 * larger one (a hand-edited link) loads an empty page past the end like any overshoot, which goes
 * back to the last page that has rows, rather than the server's "offset Too big".
 */
export function offsetOf(query: URLSearchParams): number {
  const n = Number(query.get("offset"));
  return Number.isInteger(n) && n > 0 ? Math.min(n, MAX_OFFSET) : 0;
}

/**
 * The offset of the last page that has rows, 0 when there are none: where a page left empty (its
 * last rows deleted) or past the end (an `?offset=` beyond the total) goes back to.
 */
export function lastPageOffset(total: number, limit: number): number {
  return total > 0 ? Math.floor((total - 1) / limit) * limit : 0;
}

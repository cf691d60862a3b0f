import { z } from "zod";

/**
 * Numbers that reach Postgres. A JSON body can carry any double (and `1e309` parses to Infinity);
 * a column or a cast cannot hold every double: `integer` is 32-bit, `real` (float4) fails above
 * FLOAT4_MAX and on a non-zero value that rounds to 0 in float4 (`5e-324`, `1e-50`: error 22003),
 * and float8 arithmetic fails when a product of non-zero factors underflows (`5e-324 * 0.5`).
 * Every numeric input is declared with one of the two schemas below, so each is finite, inside
 * bounds its column and SQL can hold (checked on the value as sent: outside them is a 400 naming
 * the field), and then normalised the one documented way (`flushTiny`).
 */

export const INT4_MIN = -(2 ** 31);
export const INT4_MAX = 2 ** 31 - 1;
/** The largest finite float4 (`real`). */
export const FLOAT4_MAX = 3.4028234663852886e38;
/** The smallest normal float4 (2^-126, about 1.18e-38). */
export const FLOAT4_MIN_NORMAL = 2 ** -126;

/**
 * The normalisation: a magnitude below FLOAT4_MIN_NORMAL (and -0) becomes 0, anything else is
 * unchanged. Such a value is 0 to every use here (a confidence, a weight, a latency), and as 0 it
 * fits a `real` column or a `::real` cast and cannot make float8 arithmetic underflow.
 */
export const flushTiny = (x: number): number => (Math.abs(x) < FLOAT4_MIN_NORMAL ? 0 : x);

/**
 * A finite number in [min, max] (both within ±FLOAT4_MAX, so a `real` holds any accepted value);
 * values below FLOAT4_MIN_NORMAL in magnitude are accepted and become 0 (see flushTiny).
 */
export function numberIn(min: number, max: number) {
  if (!(Number.isFinite(min) && Number.isFinite(max) && -FLOAT4_MAX <= min && min <= max && max <= FLOAT4_MAX)) {
    throw new RangeError(`numberIn(${min}, ${max}): bounds must be finite, ordered and within ±${FLOAT4_MAX}`);
  }
  return z.number().min(min).max(max).overwrite(flushTiny);
}

/** An integer in [min, max] (both within the 32-bit `integer` range); -0 becomes 0. */
export function integerIn(min: number, max: number) {
  if (!(Number.isInteger(min) && Number.isInteger(max) && INT4_MIN <= min && min <= max && max <= INT4_MAX)) {
    throw new RangeError(`integerIn(${min}, ${max}): bounds must be ordered integers within ${INT4_MIN}..${INT4_MAX}`);
  }
  return z
    .number()
    .int()
    .min(min)
    .max(max)
    .overwrite((x) => (x === 0 ? 0 : x));
}

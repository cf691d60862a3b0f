/**
 * pgvector's binary form of a `halfvec` (int16 dimensions, int16 unused, then each element as an
 * IEEE half, big-endian), from the text form the service passes ("[0.1,-0.2,...]"). The embedded
 * database parses a vector's text with the C library's float parser compiled to WASM, which costs
 * ~1.2 µs a number: ~2 ms for a 1536-d query vector, a tenth of a recall. Sent in binary, it
 * costs nothing. The value is what the text form stores: each number rounded to single
 * precision (as the text parser does), then to half precision, to nearest, ties to even.
 * Anything the text form would refuse or that is not plainly finite numbers (NaN, an infinity,
 * a value past half precision's 65504, no or too many dimensions) gives undefined: the caller
 * then sends the text, and Postgres answers it with its own error.
 */
export function halfvecBinary(text: string): Uint8Array | undefined {
  if (text.length < 3 || text[0] !== "[" || text[text.length - 1] !== "]") return undefined;
  const parts = text.slice(1, -1).split(",");
  if (parts.length > HALFVEC_MAX_DIM) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    if (!NUMBER.test(part)) return undefined;
    values.push(Number(part));
  }
  return encoded(values, true);
}

/**
 * The same binary form straight from the numbers, as their text form (`[${values.join(",")}]`,
 * JavaScript's shortest round-trip writing of each, which writes -0 as "0") stores them;
 * undefined where that text would be refused or is not plainly finite numbers, as for
 * halfvecBinary.
 */
export function halfvecBinaryOf(values: readonly number[]): Uint8Array | undefined {
  return encoded(values, false);
}

function encoded(values: readonly number[], negativeZero: boolean): Uint8Array | undefined {
  if (values.length === 0 || values.length > HALFVEC_MAX_DIM) return undefined;
  const out = new DataView(new ArrayBuffer(4 + 2 * values.length));
  out.setInt16(0, values.length);
  out.setInt16(2, 0);
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as number;
    if (typeof value !== "number" || !Number.isFinite(value)) return undefined;
    const bits = halfBits(value === 0 && !negativeZero ? 0 : value);
    if (bits === undefined) return undefined;
    out.setUint16(4 + 2 * i, bits);
  }
  return new Uint8Array(out.buffer);
}

/** pgvector's largest vector. */
const HALFVEC_MAX_DIM = 16000;
/** A plain decimal number (what JavaScript's number formatting writes), optionally spaced. */
const NUMBER = /^\s*-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i;
/** x's single-precision bits, read through one shared float (no allocation per number). */
const single = new Float32Array(1);
const singleBits = new Uint32Array(single.buffer);

/**
 * The IEEE half bits of `x` rounded to single precision first; undefined if not finite in half.
 * Done on the single's bits (its mantissa cut to 10 bits, rounded to nearest, ties to even): a
 * few integer operations, 15-25 ns a number, where a logarithm and powers took ~140 ns (36 µs a
 * 256-d row when a million rows are loaded).
 */
export function halfBits(x: number): number | undefined {
  single[0] = x;
  const bits = singleBits[0] as number;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff; // biased by 127; a half's is biased by 15
  const mantissa = bits & 0x7fffff;
  // 143 is a half exponent of 16 and up: past 65504 (also infinities and NaN).
  if (exponent >= 143) return undefined;
  if (exponent >= 113) {
    // A normal half: keep the top 10 of the 23 mantissa bits. A carry out of the mantissa
    // rightly moves the exponent up, to infinity past 65504.
    const cut = mantissa & 0x1fff;
    let half = ((exponent - 112) << 10) | (mantissa >>> 13);
    if (cut > 0x1000 || (cut === 0x1000 && half & 1)) half++;
    return half >= 0x7c00 ? undefined : sign | half;
  }
  // Below 2^-14 a half is subnormal: a count of 2^-24 steps (1024 steps is the smallest normal,
  // whose bits are that same count). Below 2^-25 it rounds to zero.
  if (exponent < 102) return sign;
  const significand = mantissa | 0x800000;
  const shift = 126 - exponent; // 14 to 24
  const cut = significand & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  let steps = significand >>> shift;
  if (cut > halfway || (cut === halfway && steps & 1)) steps++;
  return sign | steps;
}

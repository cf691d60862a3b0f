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
  const out = new DataView(new ArrayBuffer(4 + 2 * parts.length));
  out.setInt16(0, parts.length);
  out.setInt16(2, 0);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] as string;
    if (!NUMBER.test(part)) return undefined;
    const bits = halfBits(Number(part));
    if (bits === undefined) return undefined;
    out.setUint16(4 + 2 * i, bits);
  }
  return new Uint8Array(out.buffer);
}

/** pgvector's largest vector. */
const HALFVEC_MAX_DIM = 16000;
/** A plain decimal number (what JavaScript's number formatting writes), optionally spaced. */
const NUMBER = /^\s*-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i;
const HALF_OVERFLOW = 65520; // rounds to infinity
const TWO_POW_14 = 2 ** -14;
const TWO_POW_24 = 2 ** 24;

/** Rounds to the nearest integer, ties to even (`q` ≥ 0). */
function roundHalfEven(q: number): number {
  const floor = Math.floor(q);
  const rest = q - floor;
  if (rest > 0.5) return floor + 1;
  if (rest < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The IEEE half bits of `x` rounded to single precision first; undefined if not finite in half. */
export function halfBits(x: number): number | undefined {
  const single = Math.fround(x);
  if (!Number.isFinite(single)) return undefined;
  const sign = single < 0 || Object.is(single, -0) ? 0x8000 : 0;
  const a = Math.abs(single);
  if (a >= HALF_OVERFLOW) return undefined;
  // Below 2^-14 a half is subnormal: a count of 2^-24 steps (1024 steps is the smallest normal,
  // whose bits are that same count). All of this arithmetic is exact in double precision.
  if (a < TWO_POW_14) return sign | roundHalfEven(a * TWO_POW_24);
  let exponent = Math.floor(Math.log2(a));
  // log2 can land one off next to a power of two: correct it.
  if (2 ** exponent > a) exponent--;
  if (2 ** (exponent + 1) <= a) exponent++;
  let mantissa = roundHalfEven((a / 2 ** exponent - 1) * 1024);
  if (mantissa === 1024) {
    mantissa = 0;
    exponent++;
  }
  if (exponent > 15) return undefined;
  return sign | ((exponent + 15) << 10) | mantissa;
}

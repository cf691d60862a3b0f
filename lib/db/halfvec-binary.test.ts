import { describe, expect, it } from "vitest";
import { halfBits, halfvecBinary, halfvecBinaryOf } from "./halfvec-binary";

describe("halfBits", () => {
  it("encodes IEEE half precision, rounding to nearest with ties to even", () => {
    expect(halfBits(0)).toBe(0x0000);
    expect(halfBits(-0)).toBe(0x8000);
    expect(halfBits(1)).toBe(0x3c00);
    expect(halfBits(-2)).toBe(0xc000);
    expect(halfBits(0.5)).toBe(0x3800);
    expect(halfBits(65504)).toBe(0x7bff);
    expect(halfBits(65519)).toBe(0x7bff); // below the midpoint to infinity
    expect(halfBits(2 ** -14)).toBe(0x0400); // smallest normal
    expect(halfBits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(halfBits(2 ** -25)).toBe(0x0000); // a tie between 0 and the smallest subnormal: even
    expect(halfBits(1.5 * 2 ** -24)).toBe(0x0002); // a tie between 1 and 2 steps: even
    expect(halfBits(1 + 2 ** -11)).toBe(0x3c00); // a tie between 1 and its successor: even
    expect(halfBits(1 + 3 * 2 ** -11)).toBe(0x3c02); // a tie between odd and even: even
    expect(halfBits(2 ** -14 - 2 ** -25)).toBe(0x0400); // rounds up into the normals
    expect(halfBits(2047.9)).toBe(0x6800); // rounds up to the next power of two
  });

  it("gives every finite half's own bits for its value, and rounds each midpoint between two to the even one", () => {
    const halfValue = (bits: number) => {
      const exponent = (bits >> 10) & 0x1f;
      const mantissa = bits & 0x3ff;
      const magnitude = exponent === 0 ? mantissa * 2 ** -24 : (1 + mantissa / 1024) * 2 ** (exponent - 15);
      return bits & 0x8000 ? -magnitude : magnitude;
    };
    const wrong: string[] = [];
    for (const sign of [0, 0x8000]) {
      for (let bits = 0; bits < 0x7c00; bits++) {
        const h = sign | bits;
        if (halfBits(halfValue(h)) !== h) wrong.push(`${halfValue(h)} → ${halfBits(halfValue(h))}, not ${h}`);
        // Every midpoint is exact in single precision: it rounds to the even neighbour; a hair
        // either side of it rounds to that side.
        const next = sign | (bits + 1);
        const mid = (halfValue(h) + halfValue(next)) / 2;
        const even = bits % 2 === 0 ? h : next;
        const tiny = Math.abs(mid) * 2 ** -22;
        const below = sign ? next : h;
        const above = sign ? h : next;
        if (bits + 1 < 0x7c00) {
          if (halfBits(mid) !== even) wrong.push(`midpoint ${mid} → ${halfBits(mid)}, not ${even}`);
          if (halfBits(mid - tiny) !== below) wrong.push(`${mid - tiny} → ${halfBits(mid - tiny)}, not ${below}`);
          if (halfBits(mid + tiny) !== above) wrong.push(`${mid + tiny} → ${halfBits(mid + tiny)}, not ${above}`);
        }
      }
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it("refuses what half precision cannot hold", () => {
    expect(halfBits(65520)).toBeUndefined();
    expect(halfBits(Number.NaN)).toBeUndefined();
    expect(halfBits(Number.POSITIVE_INFINITY)).toBeUndefined();
    expect(halfBits(-1e300)).toBeUndefined();
  });
});

describe("halfvecBinary", () => {
  it("writes the dimensions, a zero, then each element big-endian", () => {
    expect(Array.from(halfvecBinary("[1,-2,0.5]") ?? [])).toEqual([0, 3, 0, 0, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0x00]);
    expect(Array.from(halfvecBinary("[ 1e-1 , .5]") ?? []).slice(0, 2)).toEqual([0, 2]);
  });

  it("leaves to the database's own text parser anything that is not plainly finite numbers", () => {
    for (const text of ["[]", "[1,,2]", "[NaN]", "[inf]", "[1e5]", "1,2", "[1,2", "[0x10]", "[1;2]"]) {
      expect(halfvecBinary(text)).toBeUndefined();
    }
    expect(halfvecBinary(`[${Array.from({ length: 16001 }, () => "0").join(",")}]`)).toBeUndefined();
  });
});

describe("halfvecBinaryOf", () => {
  it("gives from the numbers the bytes halfvecBinary gives from their text", () => {
    let state = 11;
    const numbers = Array.from({ length: 1536 }, () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return (state / 2 ** 31 - 0.5) * 2 ** ((state % 40) - 25);
    });
    for (const v of [numbers, [0, -0, 1, -1, 65504, 2 ** -24, 2 ** -25, 1 + 2 ** -11], [0.1, -0.2, 1e-7]]) {
      expect(Array.from(halfvecBinaryOf(v) ?? [])).toEqual(Array.from(halfvecBinary(`[${v.join(",")}]`) ?? [1]));
    }
  });

  it("refuses what the text form would leave to the database", () => {
    for (const v of [[], [Number.NaN], [Number.POSITIVE_INFINITY], [1e5], Array.from({ length: 16001 }, () => 0)]) {
      expect(halfvecBinaryOf(v)).toBeUndefined();
    }
  });
});

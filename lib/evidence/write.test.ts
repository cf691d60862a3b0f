import { describe, expect, it } from "vitest";
import { quoteComparable, WHITESPACE_RUN } from "./write";

describe("WHITESPACE_RUN", () => {
  it("is JavaScript's \\s: the same code points, every one of them", () => {
    const ours = new RegExp(`^${WHITESPACE_RUN}$`, "u");
    const differ: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      if (ours.test(ch) !== /^\s$/u.test(ch)) differ.push(cp.toString(16));
    }
    expect(differ).toEqual([]);
  });
});

describe("quoteComparable", () => {
  it("lower-cases, drops quotation marks of every kind, and reads whitespace runs as one space", () => {
    expect(quoteComparable('  I\u2019m \u201cBiscuit\u201d\'s\u00a0\n`DOG` "ok" ')).toBe("im biscuits dog ok");
    expect(quoteComparable("I'm")).toBe(quoteComparable("I\u2019M"));
  });
});

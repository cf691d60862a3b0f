import { describe, expect, it } from "vitest";
import { headOf, oneLine } from "./text";

describe("oneLine", () => {
  it("collapses every line break a reader may split on, not only JavaScript's whitespace", () => {
    const text = "a\nb\r\nc\u2028d\u0085e\u001cf\u001dg\u001eh\vi\fj \t k";
    expect(oneLine(text)).toBe("a b c d e f g h i j k");
    expect(oneLine(` x\u0085# FACTS `)).toBe("x # FACTS");
  });
});

describe("headOf", () => {
  it("keeps a text within the limit whole", () => {
    expect(headOf("ab😀", 4)).toBe("ab😀");
  });

  it("ends between two graphemes: a flag, a family, an accented letter stay whole", () => {
    expect(headOf("ab😀", 3)).toBe("ab");
    expect(headOf("abcd🇵🇹", 7)).toBe("abcd");
    const family = "👩\u200d👩\u200d👧";
    expect(headOf(`abcdefgh${family}`, 12)).toBe("abcdefgh");
    expect(headOf("abcde\u0301f", 5)).toBe("abcd");
    expect(headOf("abcde\u0301f", 6)).toBe("abcde\u0301");
    expect(headOf("abcd🇵🇹🇵🇹", 11)).toBe("abcd🇵🇹");
  });

  it("ends between two code points inside a grapheme longer than half the limit", () => {
    const zalgo = `a${"\u0301".repeat(50)}`;
    expect(headOf(zalgo, 10)).toBe(zalgo.slice(0, 10));
    expect(headOf("😀😀😀", 5)).toBe("😀😀");
  });

  it("is empty at a limit of 0", () => {
    expect(headOf("abc", 0)).toBe("");
  });
});

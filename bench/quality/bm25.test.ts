import { describe, expect, it } from "vitest";
import { bm25Index, terms } from "./bm25";

describe("BM25", () => {
  it("tokenises to lower-case content words, a plural s dropped", () => {
    expect(terms("Where do I live? My sisters' flats in Lisbon")).toEqual(["live", "sister", "flat", "lisbon"]);
  });

  it("scores with IDF: a rare term outweighs a common one", () => {
    const index = bm25Index(["user likes tea", "user likes coffee", "user likes jazz", "user owns a kayak"]);
    const [tea, coffee, jazz, kayak] = index.score("likes kayak");
    expect(kayak).toBeGreaterThan(tea);
    expect(tea).toBeCloseTo(coffee);
    expect(tea).toBeCloseTo(jazz);
  });

  it("matches the Okapi formula (k1 1.2, b 0.75) on a hand-computed case", () => {
    const docs = ["apple banana", "apple apple cherry", "durian"];
    const [a, b, c] = bm25Index(docs).score("apple");
    const idf = Math.log(1 + (3 - 2 + 0.5) / (2 + 0.5));
    const avg = (2 + 3 + 1) / 3;
    const term = (f: number, len: number) => (idf * f * 2.2) / (f + 1.2 * (1 - 0.75 + (0.75 * len) / avg));
    expect(a).toBeCloseTo(term(1, 2), 10);
    expect(b).toBeCloseTo(term(2, 3), 10);
    expect(c).toBe(0);
  });

  it("saturates term frequency and favours short documents", () => {
    const [once, many, long] = bm25Index([
      "kayak trip",
      "kayak kayak kayak kayak trip",
      "kayak trip with many other words in it",
    ]).score("kayak");
    expect(many).toBeGreaterThan(once);
    expect(many).toBeLessThan(once * 2);
    expect(long).toBeLessThan(once);
  });
});

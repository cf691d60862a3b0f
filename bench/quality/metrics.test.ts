import { describe, expect, it } from "vitest";
import { cosine, firstGoldRank, median, percentile, rankByScore, rrf, score, scoreByKind } from "./metrics";

describe("quality metrics", () => {
  it("finds the first gold id's rank, or none", () => {
    expect(firstGoldRank(["a", "b", "c"], ["c", "b"])).toBe(2);
    expect(firstGoldRank(["a", "b"], ["z"])).toBeNull();
  });

  it("scores hit@1, hit@8 from the block, hit@30 and MRR", () => {
    const s = score([
      { kind: "x", rank: 1, inBlock: true },
      { kind: "x", rank: 4, inBlock: true },
      { kind: "y", rank: 20, inBlock: false },
      { kind: "y", rank: null, inBlock: false },
    ]);
    expect(s).toEqual({ questions: 4, hit1: 0.25, hit8: 0.5, hit30: 0.75, mrr: (1 + 1 / 4 + 1 / 20) / 4 });
    const byKind = scoreByKind([{ kind: "x", rank: 2, inBlock: true }], ["x", "y"]);
    expect(byKind.byKind.x.mrr).toBe(0.5);
    expect(byKind.byKind.y).toEqual({ questions: 0, hit1: 0, hit8: 0, hit30: 0, mrr: 0 });
  });

  it("ranks by score with stable ties, and fuses ranks with RRF k=60", () => {
    expect(rankByScore(["a", "b", "c"], [0.1, 0.5, 0.1])).toEqual(["b", "a", "c"]);
    // b: 1/62 + 1/61 beats a: 1/61 + 1/63; c only in one list.
    expect(
      rrf([
        ["a", "b", "c"],
        ["b", "d", "a"],
      ]),
    ).toEqual(["b", "a", "d", "c"]);
  });

  it("computes cosine, percentiles and medians", () => {
    expect(cosine([1, 0], [0, 2])).toBe(0);
    expect(cosine([1, 1], [2, 2])).toBeCloseTo(1);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([1, 2, 3, 4], 99)).toBe(4);
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
  });
});

import { describe, expect, it } from "vitest";
import { ANALYZE_SCALE, ANALYZE_THRESHOLD, PAGES_WORTH_NEW_STATISTICS, tablesToAnalyze } from "./pglite-statistics";

const table = (pages: number, pagesWhenAnalysed: number, analysed: boolean, changedSinceAnalysed = 0) => ({
  table: `t${pages}_${pagesWhenAnalysed}_${analysed}`,
  pages,
  pagesWhenAnalysed,
  analysed,
  rows: pages * 10,
  changedSinceAnalysed,
});

describe("tablesToAnalyze", () => {
  it("takes a table never analysed once it holds rows, and never an empty one", () => {
    expect(tablesToAnalyze([table(1, 0, false), table(0, 0, false), table(0, 5, true)])).toEqual(["t1_0_false"]);
  });

  it("takes an analysed table again once it grew by a fifth and by a few pages", () => {
    expect(tablesToAnalyze([table(1_200, 1_000, true)])).toHaveLength(1);
    expect(tablesToAnalyze([table(1_199, 1_000, true)])).toEqual([]);
    // A small table grows by a fifth with every few rows: not before PAGES_WORTH_NEW_STATISTICS more.
    expect(tablesToAnalyze([table(2 + PAGES_WORTH_NEW_STATISTICS - 1, 2, true)])).toEqual([]);
    expect(tablesToAnalyze([table(2 + PAGES_WORTH_NEW_STATISTICS, 2, true)])).toHaveLength(1);
  });

  it("takes a table whose rows changed by 50 + 10% since its last ANALYZE, though a vacuum recorded its size since", () => {
    const limit = ANALYZE_THRESHOLD + ANALYZE_SCALE * 10_000;
    expect(tablesToAnalyze([table(1_000, 1_000, true, limit)])).toEqual([]);
    expect(tablesToAnalyze([table(1_000, 1_000, true, limit + 1)])).toHaveLength(1);
  });

  it("leaves a table that shrank or stayed alone", () => {
    expect(tablesToAnalyze([table(500, 1_000, true), table(1_000, 1_000, true)])).toEqual([]);
  });
});

import { describe, expect, it } from "vitest";
import { MESSAGE_BLOCKS } from "../../bench/quality/evaluate";
import { TINY } from "../../bench/quality/fixture";
import { type QualityResult, runQuality } from "../../bench/quality/quality";

/**
 * The retrieval-quality benchmark's smoke test: one user (21 facts, 6 sessions) and 10 of its
 * questions through the very code `npm run bench:quality` runs (the API, the episode pipeline,
 * the offline model). Figures are asserted for sense, not for quality, and nothing is timed.
 */
describe("bench:quality, tiny", () => {
  let result: QualityResult;
  const easy = "Where do I live?";

  it("writes the fixture through the API and stores every gold fact", { timeout: 180_000 }, async () => {
    result = await runQuality({
      seed: 42,
      size: TINY,
      select: (questions) =>
        [
          ...questions.filter((q) => q.query === easy),
          ...questions.filter((q) => q.query !== easy).filter((_, i) => i % 3 === 0),
        ].slice(0, 10),
    });
    expect(result.episodes).toEqual([
      { status: "completed", semanticStatus: "completed", episodes: result.sizes.sessions },
    ]);
    expect(result.sizes.goldStored).toBe(result.sizes.goldFacts);
    expect(result.sizes.strayStored).toBe(0);
    expect(result.sizes.questions).toBe(10);
    // The earlier homes and jobs are superseded, so fewer live facts than gold ones.
    expect(result.sizes.supersessionsApplied).toBeGreaterThan(0);
    expect(result.sizes.liveFacts).toBe(result.sizes.goldFacts - result.sizes.supersessionsApplied);
  });

  it("scores recall and the three baselines on the same questions, within their bounds", () => {
    const systems = [result.recall, result.baselines.dense, result.baselines.bm25, result.baselines.rrf];
    for (const s of systems) {
      expect(s.all.questions).toBe(10);
      const { hit1, hit8, hit30, mrr } = s.all;
      expect(0 <= hit1 && hit1 <= hit30 && hit8 <= hit30 && hit30 <= 1).toBe(true);
      expect(mrr).toBeGreaterThanOrEqual(hit1);
      expect(mrr).toBeLessThanOrEqual(hit30);
      // Fewer live facts than 30: every question whose gold is live is found in the long list.
      expect(s.all.hit30).toBeLessThanOrEqual(result.ceiling.live.all.hit30);
    }
    expect(result.recall.all.hit30).toBe(result.ceiling.live.all.hit30);
    expect(result.baselines.dense.all.hit30).toBe(result.ceiling.live.all.hit30);
    expect(result.ceiling.stored.all.hit30).toBe(1);
  });

  it("puts the current home in the block for the easy question, and measures the block", () => {
    const [first] = result.recall.questions;
    expect(first).toMatchObject({ inBlock: true });
    expect(first.rank).toBeLessThanOrEqual(3);
    expect(result.recall.tokens.median).toBeGreaterThan(20);
    expect(result.recall.tokens.max).toBeLessThan(1000);
    expect(result.recall.latencyMs.p50).toBeGreaterThan(0);
  });

  it("measures evidence in the block with messages: never below the facts alone, in a larger block", () => {
    expect(result.recall.evidence.map((e) => e.messages)).toEqual(MESSAGE_BLOCKS);
    for (const e of result.recall.evidence) {
      expect(e.inBlock).toBeGreaterThanOrEqual(result.recall.all.hit8);
      expect(e.inBlock).toBeLessThanOrEqual(1);
      expect(e.tokens.median).toBeGreaterThan(result.recall.tokens.median);
    }
  });
});

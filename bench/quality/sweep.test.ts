import { describe, expect, it } from "vitest";
import { sampleQuestions, weightGrid } from "./sweep";

describe("the weight sweep", () => {
  it("spans distinct combinations with the vector weight fixed", () => {
    const grid = weightGrid();
    expect(grid).toHaveLength(48);
    expect(new Set(grid.map((w) => JSON.stringify(w))).size).toBe(48);
    expect(grid.every((w) => w.vectorWeight === 1)).toBe(true);
    expect(grid).toContainEqual({ vectorWeight: 1, keywordWeight: 0.2, entityWeight: 0.1, timeWeight: 0.1 });
  });

  it("samples every n-th question, at most about the count asked", () => {
    const questions = Array.from({ length: 510 }, (_, i) => i);
    const sample = sampleQuestions(questions, 200);
    expect(sample.length).toBeLessThanOrEqual(200);
    expect(sample.length).toBeGreaterThan(150);
    expect(sample.slice(0, 3)).toEqual([0, 3, 6]);
    expect(sampleQuestions([1, 2], 200)).toEqual([1, 2]);
  });
});

import { describe, expect, it } from "vitest";
import { fakeEmbedding } from "../tests/helpers/fake-openai";
import { benchEmbedding } from "./embedding";

const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i], 0);

describe("benchEmbedding: the test provider's vectors, rotated", () => {
  const texts = ["user likes spicy tea number 5", "what about spicy tea and the jazz club", "user owns a kayak"];

  it("keeps every cosine and unit length, at every size (power of two or not)", () => {
    for (const dims of [7, 64, 256, 1000, 1536]) {
      for (const a of texts) {
        expect(dot(benchEmbedding(a, dims), benchEmbedding(a, dims)), `${dims}`).toBeCloseTo(1, 12);
        for (const b of texts) {
          const sparse = dot(fakeEmbedding(a, dims), fakeEmbedding(b, dims));
          expect(dot(benchEmbedding(a, dims), benchEmbedding(b, dims)), `${dims}: ${a} / ${b}`).toBeCloseTo(sparse, 12);
        }
      }
    }
  });

  it("sets every dimension, where the provider's vector sets a few", () => {
    for (const dims of [256, 1536]) {
      expect(fakeEmbedding(texts[0], dims).filter((x) => x !== 0).length).toBeLessThan(40);
      expect(benchEmbedding(texts[0], dims).filter((x) => Math.abs(x) < 1e-9)).toEqual([]);
    }
  });

  it("is the same vector for the same text", () => {
    expect(benchEmbedding(texts[1], 256)).toEqual(benchEmbedding(texts[1], 256));
    expect(benchEmbedding(texts[1], 256)).not.toEqual(benchEmbedding(texts[2], 256));
  });
});

import { createHash } from "node:crypto";
import { fakeEmbedding, startFakeOpenAI } from "../tests/helpers/fake-openai";

/** Rounds of the rotation: each one spreads every value over the whole vector. */
const ROUNDS = 3;

const signCache = new Map<string, Float64Array>();

/** A fixed pseudo-random ±1 per dimension, for round `round`. */
function signs(dims: number, round: number): Float64Array {
  const key = `${dims}:${round}`;
  let cached = signCache.get(key);
  if (!cached) {
    const s = new Float64Array(dims);
    for (let start = 0; start < dims; start += 256) {
      const bits = createHash("sha256").update(`bench rotation ${key}:${start}`).digest();
      for (let k = 0; k < 256 && start + k < dims; k++) s[start + k] = (bits[k >> 3] >> (k & 7)) & 1 ? 1 : -1;
    }
    signCache.set(key, s);
    cached = s;
  }
  return cached;
}

/** An orthonormal Walsh-Hadamard transform of each power-of-two block of `v` (its size in binary), in place. */
function hadamardBlocks(v: Float64Array) {
  let start = 0;
  for (let size = 1 << 14; size >= 1; size >>= 1) {
    if (!(v.length & size)) continue;
    for (let h = 1; h < size; h <<= 1) {
      for (let i = start; i < start + size; i += h << 1) {
        for (let j = i; j < i + h; j++) {
          const a = v[j];
          const b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
    const scale = 1 / Math.sqrt(size);
    for (let i = start; i < start + size; i++) v[i] *= scale;
    start += size;
  }
}

/**
 * The bench's embedding: the test provider's (a hashed bag of words: a few non-zero dimensions)
 * turned by a fixed rotation (random signs, a rotation of each pair across the two halves, a
 * Hadamard transform per block; three rounds), so every dimension carries a value as a real
 * model's do. A rotation keeps every cosine, so which facts are nearest a query is the same; but
 * the stored vectors, their sign bits (the binary index) and how well they compress are a real
 * model's rather than a sparse vector's.
 */
export function benchEmbedding(text: string, dims: number): number[] {
  const v = Float64Array.from(fakeEmbedding(text, dims));
  const half = dims >> 1;
  for (let round = 0; round < ROUNDS; round++) {
    const s = signs(dims, round);
    for (let i = 0; i < dims; i++) v[i] *= s[i];
    const cos = Math.cos(0.5 + round);
    const sin = Math.sin(0.5 + round);
    for (let i = 0; i < half; i++) {
      const a = v[i];
      const b = v[i + half];
      v[i] = cos * a - sin * b;
      v[i + half] = sin * a + cos * b;
    }
    hadamardBlocks(v);
  }
  return Array.from(v);
}

/** The fake provider, embedding with benchEmbedding (so the service's queries match the seeded facts). */
export function startBenchProvider() {
  return startFakeOpenAI({ embed: async (texts, dims) => texts.map((text) => benchEmbedding(text, dims)) });
}

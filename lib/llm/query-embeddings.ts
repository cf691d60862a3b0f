import { LRUCache } from "lru-cache";

/**
 * Query embeddings kept in memory (per process on Node.js, per isolate on the edge), so a
 * repeated recall query makes no provider call. Bounded by bytes: a vector costs 8 bytes per
 * dimension as a JS number array. Keyed by model and size as well as text, so a configuration
 * change never serves a vector of the wrong kind, and by tenant: shared by every project, a hit
 * (free in the ledger, `cached` in Server-Timing) told one tenant that another had just recalled
 * or chatted those exact words.
 */
export interface QueryEmbeddings {
  get(key: QueryKey): number[] | undefined;
  set(key: QueryKey, vector: number[]): void;
}

export interface QueryKey {
  /** Whose query: a project's id, or for a /v1 read whose project only SQL knows, its API key's hash. */
  tenant: string;
  model: string;
  dimensions: number;
  text: string;
}

export const DEFAULT_QUERY_CACHE_BYTES = 16 * 1024 * 1024;

export function createQueryEmbeddings(maxBytes = DEFAULT_QUERY_CACHE_BYTES): QueryEmbeddings {
  const cache = new LRUCache<string, number[]>({
    maxSize: maxBytes,
    sizeCalculation: (vector, key) => vector.length * 8 + key.length * 2,
  });
  const keyOf = (k: QueryKey) => `${k.tenant}\u0000${k.model}\u0000${k.dimensions}\u0000${k.text}`;
  return {
    get: (key) => cache.get(keyOf(key)),
    set: (key, vector) => {
      cache.set(keyOf(key), vector);
    },
  };
}

import { sql } from "drizzle-orm";
import type { Db } from "./types";

export const EMBEDDED_TABLES = ["facts", "entities", "episodes", "message_vectors"] as const;
export type EmbeddedTable = (typeof EMBEDDED_TABLES)[number];

/**
 * From this size up, the HNSW indexes hold each vector's sign bits (`binary_quantize`, 1 bit per
 * dimension) instead of the whole vector: a 1536-d index element is 192 bytes instead of 6 KB,
 * builds ~40× faster and is searched by Hamming distance, and the searches re-rank
 * BINARY_RERANK_FACTOR × as many candidates by cosine over the stored vectors (see
 * lib/db/vectors.ts). Below it the sign bits are too few to find the neighbours, and the index
 * holds the vector in single precision (`float32`).
 */
export const BINARY_INDEX_MIN_DIMS = 1024;

/**
 * `float32`: the vector as pgvector's `vector` (4 bytes a dimension, though the column stores 2):
 * compiled to WASM (the embedded database), a half-precision distance converts every element
 * with bit operations and costs ~3× a single-precision one (256 dims: 2.2 against 0.76 µs), and
 * building or searching the graph is mostly distances: the build took 2.18 ms a row over
 * `halfvec` against 0.57 over `vector` (bench/RESULTS.md, the night of 2026-11-27). Natively
 * both are cheap.
 */
export type VectorIndexKind = "float32" | "binary";

export function vectorIndexKind(dims: number): VectorIndexKind {
  return dims >= BINARY_INDEX_MIN_DIMS ? "binary" : "float32";
}

/** The HNSW graph's build parameters (pgvector's defaults unless given). */
export interface HnswBuild {
  m: number;
  efConstruction: number;
}

/**
 * The CREATE INDEX of a table's HNSW index for `dims`: the columns are untyped `halfvec`s because
 * the size is a deployment setting, so each index is an expression index (with the size in its
 * type) restricted to rows of that size. Queries use the same expression and predicate
 * (lib/db/vectors.ts) so the planner picks the index. Migration 0015 dropped the half-precision
 * indexes made before `float32`; the same names are built again over the new expression.
 */
export function vectorIndexSql(table: EmbeddedTable, dims: number, build?: HnswBuild): string {
  const indexed =
    vectorIndexKind(dims) === "binary"
      ? `(binary_quantize(embedding)::bit(${dims})) bit_hamming_ops`
      : `(embedding::vector(${dims})) vector_cosine_ops`;
  const parameters = build ? ` WITH (m = ${build.m}, ef_construction = ${build.efConstruction})` : "";
  return (
    `CREATE INDEX IF NOT EXISTS ${vectorIndexName(table, dims)} ON ${table} USING hnsw (${indexed})${parameters} ` +
    `WHERE vector_dims(embedding) = ${dims}`
  );
}

export function vectorIndexName(table: EmbeddedTable, dims: number): string {
  return `${table}_embedding_hnsw_${dims}`;
}

/** The HNSW indexes for the configured embedding size. Idempotent; run after the migrations. */
export async function ensureVectorIndexes(db: Db, dims: number): Promise<void> {
  if (!Number.isInteger(dims) || dims < 1 || dims > 4000) {
    throw new Error(`EMBEDDING_DIMENSIONS must be an integer from 1 to 4000 (got ${dims})`);
  }
  for (const table of EMBEDDED_TABLES) await db.execute(sql.raw(vectorIndexSql(table, dims)));
}

import { sql } from "drizzle-orm";
import type { Db } from "./types";

export const EMBEDDED_TABLES = ["facts", "entities", "episodes"] as const;

/**
 * HNSW (cosine) indexes for the configured embedding size. The columns are untyped `vector`s
 * because the size is a deployment setting, so each index is an expression index over
 * `embedding::halfvec(<dims>)` (half-precision halves the index) restricted to rows of that size.
 * Queries use the same expression and predicate (see `vectorExpr`) so the planner picks the index.
 * Idempotent; run after the migrations.
 */
export async function ensureVectorIndexes(db: Db, dims: number): Promise<void> {
  if (!Number.isInteger(dims) || dims < 1 || dims > 4000) {
    throw new Error(`EMBEDDING_DIMENSIONS must be an integer from 1 to 4000 (got ${dims})`);
  }
  for (const table of EMBEDDED_TABLES) {
    await db.execute(
      sql.raw(
        `CREATE INDEX IF NOT EXISTS ${table}_embedding_hnsw_${dims} ON ${table} ` +
          `USING hnsw ((embedding::halfvec(${dims})) halfvec_cosine_ops) ` +
          `WHERE vector_dims(embedding) = ${dims}`,
      ),
    );
  }
}

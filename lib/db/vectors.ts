import { type SQL, sql } from "drizzle-orm";

/** A vector parameter in pgvector's text form. */
export function vectorParam(vector: number[]): SQL {
  return sql`${`[${vector.join(",")}]`}::vector`;
}

/**
 * Cosine distance between a table's `embedding` and a query vector, written exactly as the HNSW
 * expression indexes are (lib/db/vector-indexes.ts) so the planner can use them: order by this,
 * ascending, with a LIMIT, and filter with `sameDims` (the partial index's predicate).
 */
export function cosineDistance(column: SQL, vector: number[]): SQL {
  const dims = vector.length;
  return sql`(${column}::halfvec(${sql.raw(String(dims))}) <=> ${`[${vector.join(",")}]`}::halfvec(${sql.raw(String(dims))}))`;
}

export function sameDims(column: SQL, vector: number[]): SQL {
  return sql`vector_dims(${column}) = ${sql.raw(String(vector.length))}`;
}

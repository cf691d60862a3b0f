import { rmSync } from "node:fs";
import { type SQL, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { vectorIndexName } from "../../lib/db/vector-indexes";
import { nearestSql } from "../../lib/db/vectors";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0015 on a database made before it, with the half-precision HNSW indexes the service
 * built for vectors below 1024 dimensions: they give way to single-precision ones under the same
 * names, built when the service starts, and searches use them and find the true nearest.
 */
const DIMS = 256;
const FACTS = 300;
let database: Database;
let folder: string;

const vectorOf = (seed: number) => {
  const v = Array.from({ length: DIMS }, (_, i) => Math.sin(seed * 1.7 + i * (0.3 + (seed % 11) * 0.01)));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};
const text = (v: number[]) => `[${v.join(",")}]`;

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0015_float32_vector_indexes", DIMS));
  const db = database.db;
  for (let i = 0; i < FACTS; i++) {
    await db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
      VALUES (${`fct_${i}`}, 'prj_old', 'ds', 'user', 'likes', ${`thing ${i}`}, 0.9, 'I said so', now(), ${text(vectorOf(i))}::halfvec)`);
  }
  await migrateDatabase(database, DIMS);
  await db.execute(sql`ANALYZE facts`);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

const lines = async (statement: SQL) =>
  rowsOf<Record<string, string>>(await database.db.execute(statement)).map((r) => Object.values(r)[0]);

describe("migration 0015: single-precision HNSW indexes below 1024 dimensions", () => {
  it("replaces each half-precision index with a single-precision one of the same name", async () => {
    const indexes = rowsOf<{ name: string; definition: string }>(
      await database.db.execute(sql`
        SELECT indexname AS name, indexdef AS definition FROM pg_indexes
        WHERE indexname LIKE '%embedding_hnsw%' ORDER BY indexname`),
    );
    expect(indexes.map((i) => i.name)).toEqual(
      ["entities", "episodes", "facts", "message_vectors"].map((t) => `${t}_embedding_hnsw_${DIMS}`),
    );
    for (const index of indexes) {
      expect(index.definition).toContain(`(embedding)::vector(${DIMS})) vector_cosine_ops`);
      expect(index.definition).not.toContain("halfvec_cosine_ops");
    }
  });

  it("serves the vector search, which finds the same nearest as an exact scan", async () => {
    const query = sql`${text(vectorOf(7.5))}::halfvec`;
    const search = nearestSql({
      from: sql`facts f`,
      column: sql`f.embedding`,
      select: sql`f.id`,
      where: sql`f.project_id = 'prj_old' AND f.dataset = 'ds'`,
      query,
      dims: DIMS,
      limit: sql`5`,
    });
    const plan = await lines(sql`EXPLAIN ${search}`);
    expect(plan.join("\n")).toContain(`Index Scan using ${vectorIndexName("facts", DIMS)}`);
    const found = rowsOf<{ id: string; distance: number }>(await database.db.execute(search));
    // "+ 0" keeps the planner off the index; the distance in half precision, as stored.
    const exact = rowsOf<{ id: string; distance: number }>(
      await database.db.execute(sql`SELECT id, (embedding <=> ${query}) + 0 AS distance FROM facts ORDER BY 2 LIMIT 5`),
    );
    expect(found.map((r) => r.id)).toEqual(exact.map((r) => r.id));
    for (const [i, row] of found.entries()) expect(Number(row.distance)).toBeCloseTo(Number(exact[i].distance), 5);
  });
});

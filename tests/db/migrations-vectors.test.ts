import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migrations 0013 and 0014 on a database that already holds vectors (made by the migrations
 * before them, with the HNSW indexes the service used to create over `vector` columns): every
 * embedding is kept (at half precision), the old indexes give way to the new ones, a 1536-d row
 * ends up whole in its page, and the keyword index's pending list stays small.
 */
const BEFORE = "0013_halfvec_embeddings";
const DIMS = 1536;
let database: Database;
let folder: string;

/** A unit vector with every dimension set (as a real model's), different for each seed. */
const unitVector = (seed: number) => {
  const v = Array.from({ length: DIMS }, (_, i) => Math.sin(seed * 7.3 + i * 0.61) + (i % 5 === 0 ? -0.4 : 0.2));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};
const text = (v: number[]) => `[${v.join(",")}]`;

beforeAll(async () => {
  ({ database, folder } = await databaseBefore(BEFORE, DIMS));
  const db = database.db;
  for (let i = 0; i < 4; i++) {
    await db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
      VALUES (${`fct_old_${i}`}, 'prj_old', 'ds', 'user', 'likes', ${`thing ${i}`}, 0.9, 'I said so', now(),
        ${i === 3 ? null : text(unitVector(i))}::vector)`);
  }
  await db.execute(sql`
    INSERT INTO entities (id, project_id, dataset, name, type, embedding)
    VALUES ('ent_old', 'prj_old', 'ds', 'Lisbon', 'PLACE', ${text(unitVector(10))}::vector)`);
  await db.execute(sql`
    INSERT INTO episodes (id, project_id, thread_id, dataset, from_seq, to_seq, started_at, ended_at, embedding)
    VALUES ('epi_old', 'prj_old', 'thr_old', 'ds', 1, 2, now(), now(), ${text(unitVector(20))}::vector)`);
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0013: embeddings at half precision", () => {
  it("keeps every embedding, at half precision", async () => {
    const rows = rowsOf<{ id: string; v: string | null; type: string }>(
      await database.db.execute(sql`
        SELECT id, embedding::text AS v, pg_typeof(embedding)::text AS type FROM facts
        UNION ALL SELECT id, embedding::text, pg_typeof(embedding)::text FROM entities
        UNION ALL SELECT id, embedding::text, pg_typeof(embedding)::text FROM episodes ORDER BY id`),
    );
    const expected: Record<string, number[] | null> = {
      ent_old: unitVector(10),
      epi_old: unitVector(20),
      fct_old_0: unitVector(0),
      fct_old_1: unitVector(1),
      fct_old_2: unitVector(2),
      fct_old_3: null,
    };
    expect(rows.map((r) => r.id)).toEqual(Object.keys(expected));
    for (const row of rows) {
      expect(row.type, row.id).toBe("halfvec");
      const want = expected[row.id];
      if (want === null) {
        expect(row.v, row.id).toBeNull();
        continue;
      }
      const got = (row.v as string).slice(1, -1).split(",").map(Number);
      expect(got, row.id).toHaveLength(DIMS);
      // Half precision: 11 significant bits.
      for (const [i, x] of got.entries()) expect(Math.abs(x - want[i]), `${row.id}[${i}]`).toBeLessThan(2 ** -11);
    }
  });

  it("replaces the indexes over the old columns with the binary ones for 1536 dimensions", async () => {
    const indexes = rowsOf<{ name: string; definition: string }>(
      await database.db.execute(sql`
        SELECT indexname AS name, indexdef AS definition FROM pg_indexes
        WHERE indexname LIKE '%embedding_hnsw%' ORDER BY indexname`),
    );
    expect(indexes.map((i) => i.name)).toEqual([
      "entities_embedding_hnsw_1536",
      "episodes_embedding_hnsw_1536",
      "facts_embedding_hnsw_1536",
      "message_vectors_embedding_hnsw_1536",
    ]);
    for (const index of indexes)
      expect(index.definition).toContain("binary_quantize(embedding))::bit(1536)) bit_hamming_ops");
  });

  it("keeps a 1536-d fact's vector in its row (nothing in TOAST), and pgvector's default search list", async () => {
    const [row] = rowsOf<{ toast: number; ef: string }>(
      await database.db.execute(sql`
        SELECT (SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'facts') AS toast,
          current_setting('hnsw.ef_search') AS ef`),
    );
    expect(Number(row.toast)).toBe(0);
    expect(row.ef).toBe("40");
  });
});

describe("migration 0014: the keyword index's pending list", () => {
  it("stays small, so a keyword lookup reads a few pages however many facts were just written", async () => {
    await database.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
      SELECT 'fct_many_' || g, 'prj_old', 'many', 'user', 'likes', 'thing ' || g || ' of kind ' || (g % 7), 0.9,
        'I said I like thing ' || g, now()
      FROM generate_series(1, 3000) g`);
    const plan = rowsOf<Record<string, string>>(
      await database.db.execute(sql`
        EXPLAIN (ANALYZE, BUFFERS) SELECT id FROM facts WHERE search @@ '2999'::tsquery`),
    ).map((r) => Object.values(r)[0]);
    const index = plan.findIndex((line) => line.includes("Bitmap Index Scan on facts_search_idx"));
    expect(index, plan.join("\n")).toBeGreaterThanOrEqual(0);
    const buffers = /shared hit=(\d+)/.exec(plan.slice(index).find((line) => line.includes("Buffers:")) ?? "");
    // With the default 4 MB list, the ~100 pages of these facts' pending entries are all read.
    expect(Number(buffers?.[1]), plan.join("\n")).toBeLessThan(20);
  });
});

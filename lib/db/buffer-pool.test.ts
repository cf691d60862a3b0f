import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../log";
import {
  bufferPoolAdvice,
  INDEX_BYTES_WORTH_A_WARNING,
  LARGEST_USEFUL_POOL,
  warnIfIndexesOutgrowBufferPool,
} from "./buffer-pool";
import { createPgliteDatabase } from "./pglite";
import { rowsOf } from "./rows";

const MB = 1024 * 1024;

describe("bufferPoolAdvice", () => {
  it("says nothing while the indexes are small or the pool holds them", () => {
    expect(bufferPoolAdvice(0, 32 * MB)).toEqual({ kind: "fits" });
    expect(bufferPoolAdvice(250 * MB, 32 * MB)).toEqual({ kind: "fits" }); // 100,000 facts
    expect(bufferPoolAdvice(INDEX_BYTES_WORTH_A_WARNING, 32 * MB)).toEqual({ kind: "fits" });
    expect(bufferPoolAdvice(900 * MB, 900 * MB)).toEqual({ kind: "fits" });
  });

  it("suggests a pool that holds the indexes with room to spare, in 100 MB steps", () => {
    expect(bufferPoolAdvice(600 * MB, 32 * MB)).toEqual({ kind: "raise", suggestMB: 700, holdsAll: true });
    expect(bufferPoolAdvice(1000 * MB, 128 * MB)).toEqual({ kind: "raise", suggestMB: 1200, holdsAll: true });
  });

  it("suggests no more than the largest pool worth having, and says when even that holds only part", () => {
    // A million 256-d facts: a 1.37 GB index.
    expect(bufferPoolAdvice(1306 * MB, 32 * MB)).toEqual({ kind: "raise", suggestMB: 1200, holdsAll: false });
    expect(bufferPoolAdvice(1306 * MB, LARGEST_USEFUL_POOL)).toEqual({ kind: "fits" });
  });
});

describe("warnIfIndexesOutgrowBufferPool", () => {
  it("weighs the database's HNSW indexes against its pool, and warns with the setting to change", async () => {
    const database = await createPgliteDatabase({ sharedBuffers: "16MB" });
    try {
      await database.db.execute(sql`CREATE EXTENSION IF NOT EXISTS vector`);
      await database.db.execute(sql`CREATE TABLE t (v vector(3))`);
      await database.db.execute(sql`INSERT INTO t SELECT ARRAY[g, 1, 2]::vector FROM generate_series(1, 500) g`);
      await database.db.execute(sql`CREATE INDEX t_hnsw ON t USING hnsw (v vector_cosine_ops)`);
      const [{ bytes }] = rowsOf<{ bytes: number }>(
        await database.db.execute(sql`SELECT pg_relation_size('t_hnsw') AS bytes`),
      );
      const warnings: [string, unknown][] = [];
      const log = { ...silentLogger, warn: (message: string, fields?: unknown) => warnings.push([message, fields]) };
      const seen: number[][] = [];
      await warnIfIndexesOutgrowBufferPool(database.db, log, (indexBytes, poolBytes) => {
        seen.push([indexBytes, poolBytes]);
        return { kind: "raise", suggestMB: 700, holdsAll: true };
      });
      expect(seen).toEqual([[Number(bytes), 16 * MB]]);
      expect(warnings).toEqual([
        [
          "the vector indexes are larger than the embedded database's buffer pool, so recall reads index pages from disk: set PGLITE_SHARED_BUFFERS=700MB",
          { vectorIndexMB: 0, sharedBuffersMB: 16 },
        ],
      ]);
      // With the real advice a small index says nothing.
      await warnIfIndexesOutgrowBufferPool(database.db, log);
      expect(warnings).toHaveLength(1);
    } finally {
      await database.close();
    }
  });
});

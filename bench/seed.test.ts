import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { rowsOf } from "../lib/db/rows";
import { benchDatabaseOptions, benchService } from "./lib";
import { PGVECTOR_DEFAULT_BUILD } from "./recall";
import { buildVectorIndexes, openSeeded } from "./seed";

type Bench = Awaited<ReturnType<typeof benchService>>;
const open: Bench[] = [];
afterAll(async () => {
  for (const bench of open) await bench.close();
});

/** The facts' and links' indexes and constraints as Postgres prints them (the HNSW ones aside). */
async function schemaOf(bench: Bench) {
  const rows = rowsOf<{ def: string }>(
    await bench.service.deps.db.execute(sql`
      SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index
       WHERE indrelid IN ('facts'::regclass, 'fact_entities'::regclass)
      UNION ALL
      SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
       WHERE conrelid IN ('facts'::regclass, 'fact_entities'::regclass) OR confrelid = 'facts'::regclass
      ORDER BY 1`),
  );
  return rows.map((r) => r.def).filter((def) => !def.includes("hnsw"));
}

describe("seedFacts: the bench's bulk load", () => {
  it("loads every fact with its link and keyword statistics, and leaves the indexes and keys as the migrations made them", async () => {
    const fresh = await benchService();
    open.push(fresh);
    const expected = await schemaOf(fresh);
    expect(expected.join("\n")).toMatch(/facts_search_idx/);

    const { bench, seed } = await openSeeded(
      { facts: 2_500, neighbours: 300, dims: 64, build: PGVECTOR_DEFAULT_BUILD },
      { EMBEDDING_DIMENSIONS: "64" },
    );
    open.push(bench);
    expect(await schemaOf(bench)).toEqual(expected);
    const [counts] = rowsOf<Record<string, number>>(
      await bench.service.deps.db.execute(sql`SELECT
        (SELECT count(*) FROM facts WHERE dataset = 'big') AS big,
        (SELECT count(*) FROM facts WHERE dataset = 'neighbour') AS neighbour,
        (SELECT count(*) FROM fact_entities fe JOIN entities e ON e.id = fe.entity_id) AS links,
        (SELECT docs FROM fact_terms WHERE project_id = ${seed.projectId} AND dataset = 'big' AND term = '') AS counted,
        (SELECT count(DISTINCT vector_dims(embedding)) FROM facts) AS sizes,
        (SELECT count(*) FROM pg_indexes WHERE indexname = 'facts_embedding_hnsw_64') AS hnsw`),
    );
    expect(counts).toEqual({ big: 2500, neighbour: 300, links: 2800, counted: 2500, sizes: 1, hnsw: 1 });
    // The keyword search finds a seeded fact by its unique word.
    const [found] = rowsOf<{ id: string }>(
      await bench.service.deps.db.execute(
        sql`SELECT id FROM facts WHERE search @@ plainto_tsquery('english', 'number 1234') AND dataset = 'big'`,
      ),
    );
    expect(found?.id).toBe("fct_big_1234");
    expect(seed.buildNotices).toEqual([]);

    // Built again with too little memory for its graph, the index build says so.
    const notices = await buildVectorIndexes(bench, 64, PGVECTOR_DEFAULT_BUILD, "1MB");
    expect(notices.join("\n")).toMatch(/hnsw graph no longer fits into maintenance_work_mem after \d+ tuples/);
  }, 120_000); // A bulk load and an HNSW build: about 15 s alone, longer beside the other suites.
});

describe("openSeeded with --shared-buffers", () => {
  it("loads a directory with the default pool, then opens it with the large one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "memsvc-seed-pool-"));
    benchDatabaseOptions.sharedBuffers = "48MB";
    const pools: string[] = [];
    const poolOf = async (b: Bench) =>
      rowsOf<{ shared_buffers: string }>(await b.service.deps.db.execute(sql`SHOW shared_buffers`))[0]?.shared_buffers;
    try {
      const plan = { facts: 300, neighbours: 30, dims: 64, build: PGVECTOR_DEFAULT_BUILD };
      const env = { EMBEDDING_DIMENSIONS: "64" };
      const { bench, seed } = await openSeeded(plan, env, { dir: join(dir, "pglite"), keep: true });
      pools.push((await poolOf(bench)) ?? "");
      const [{ n }] = rowsOf<{ n: number }>(
        await bench.service.deps.db.execute(sql`SELECT count(*)::int AS n FROM facts WHERE dataset = 'big'`),
      );
      expect(n).toBe(300);
      expect(seed.sharedBuffers).not.toBe("48MB");
      await bench.close();
      // Opened again, the kept seed is reused with the same pool.
      const again = await openSeeded(plan, env, { dir: join(dir, "pglite"), keep: true });
      expect(again.seed).toMatchObject({ projectId: seed.projectId, reused: true });
      pools.push((await poolOf(again.bench)) ?? "");
      await again.bench.close();
      // Without the option, the pool is PGlite's own.
      delete benchDatabaseOptions.sharedBuffers;
      const plain = await openSeeded(plan, env, { dir: join(dir, "pglite"), keep: true });
      pools.push((await poolOf(plain.bench)) ?? "");
      await plain.bench.close();
    } finally {
      delete benchDatabaseOptions.sharedBuffers;
      rmSync(dir, { recursive: true, force: true });
    }
    expect(pools[0]).toBe("48MB");
    expect(pools[1]).toBe("48MB");
    expect(pools[2]).not.toBe("48MB");
  }, 120_000);
});

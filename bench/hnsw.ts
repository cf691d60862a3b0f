import { sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { type HnswBuild, vectorIndexName } from "../lib/db/vector-indexes";
import { nearestSql } from "../lib/db/vectors";
import { DEFAULT_SETTINGS } from "../lib/settings/settings";
import type { IterativeScan } from "./args";
import { benchEmbedding, startBenchProvider } from "./embedding";
import { memoryNow, percentile, reopenBench } from "./lib";
import { searchedEf, type VectorQuality, vectorRecallAt10 } from "./recall";
import { openSeeded, recallQueries, type SeedStore } from "./seed";

export interface HnswSetting extends VectorQuality {
  /** The session's `hnsw.ef_search` (the database setting recall takes as a floor). */
  efSearch: number;
  /** What recall's vector search ran with: the floor, raised for the dataset's size (limitWithEfSearch). */
  efSearched: number;
  iterative: IterativeScan;
  hnswIndexUsed: boolean;
  /** Recall with a query (hybrid: vector, keyword and anchors), provider 0 ms. */
  withQuery: { p50Ms: number; p99Ms: number };
}

export interface HnswBenchResult {
  liveFacts: number;
  dimensions: number;
  build: HnswBuild;
  loadSeconds: number;
  indexSeconds: number;
  /** The facts HNSW index's size per indexed row (bytes). */
  indexBytesPerFact: number;
  settings: HnswSetting[];
  memory: ReturnType<typeof memoryNow>;
}

/**
 * Approximate search quality and its price: `liveFacts` facts (and as many neighbours in the same
 * table) indexed with `build`, then for each iterative scan mode and ef_search, the vector
 * signal's recall@10 against exact search (50 queries) and recall's p50 with a query (`calls`).
 * The settings are session settings, so the service's own statements run under each in turn;
 * recall raises an ef_search below what the dataset's size calls for (`efSearched`).
 */
export async function benchHnsw(
  liveFacts: number,
  dims: number,
  build: HnswBuild,
  sweep: { efSearch: number[]; iterative: IterativeScan[]; calls: number },
  neighbours = liveFacts,
  store: SeedStore = {},
): Promise<HnswBenchResult> {
  const fake = await startBenchProvider();
  const seedPlan = { facts: liveFacts, neighbours, dims, build };
  const env = { OPENAI_API_KEY: "bench", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: String(dims) };
  const opened = await openSeeded(seedPlan, env, { durability: "fast", ...store }).catch(async (err) => {
    await fake.close();
    throw err;
  });
  let bench = opened.bench;
  const seed = opened.seed;
  try {
    let db = bench.service.deps.db;
    const { projectId, entityCount, loadSeconds, indexSeconds } = seed;
    const [size] = rowsOf<{ bytes: string }>(
      await db.execute(sql`SELECT pg_relation_size(${vectorIndexName("facts", dims)}) AS bytes`),
    );
    const queries = recallQueries(sweep.calls, entityCount);
    const settings: HnswSetting[] = [];
    for (const iterative of sweep.iterative) {
      for (const efSearch of sweep.efSearch) {
        if (bench.server) {
          // A SET holds for one of the pool's connections: on a server the settings go on the
          // database, and the service reconnects so that every connection starts with them.
          await db.execute(sql.raw(`ALTER DATABASE ${bench.server.name} SET hnsw.iterative_scan = ${iterative}`));
          await db.execute(sql.raw(`ALTER DATABASE ${bench.server.name} SET hnsw.ef_search = ${efSearch}`));
          bench = await reopenBench(bench, env);
          db = bench.service.deps.db;
        } else {
          await db.execute(sql.raw(`SET hnsw.iterative_scan = ${iterative}`));
          await db.execute(sql.raw(`SET hnsw.ef_search = ${efSearch}`));
        }
        const quality = await vectorRecallAt10(
          db,
          { projectId, liveFacts, dims, secondSearch: DEFAULT_SETTINGS.semantic.vectorSecondSearch },
          queries.slice(0, 50),
        );
        for (let i = 0; i < 10; i++)
          await bench.call("POST", "/v1/memory/recall", { dataset: "big", query: `warm ${i}` });
        const latencies: number[] = [];
        for (const query of queries) {
          const started = performance.now();
          await bench.call("POST", "/v1/memory/recall", { dataset: "big", query: `${query} ${efSearch} ${iterative}` });
          latencies.push(performance.now() - started);
        }
        latencies.sort((a, b) => a - b);
        const query = sql`${`[${benchEmbedding(queries[0], dims)}]`}::halfvec`;
        const search = nearestSql({
          from: sql`facts f`,
          column: sql`f.embedding`,
          select: sql`f.id`,
          where: sql`true`,
          query,
          dims,
          limit: sql`30`,
        });
        const plan = rowsOf<Record<string, string>>(await db.execute(sql`EXPLAIN ${search}`));
        settings.push({
          efSearch,
          efSearched: searchedEf(efSearch, liveFacts, dims),
          iterative,
          ...quality,
          hnswIndexUsed: plan.some((r) => Object.values(r)[0].includes(vectorIndexName("facts", dims))),
          withQuery: { p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) },
        });
      }
    }
    return {
      liveFacts,
      dimensions: dims,
      build,
      loadSeconds,
      indexSeconds,
      indexBytesPerFact: Number(size.bytes) / (liveFacts + neighbours),
      settings,
      memory: memoryNow(bench.database),
    };
  } finally {
    await bench.close();
    await fake.close();
  }
}

import { type SQL, sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { EMBEDDED_TABLES, type HnswBuild, vectorIndexName } from "../lib/db/vector-indexes";
import { nearestSql, searchLimitsFor, vectorParam } from "../lib/db/vectors";
import { createProject } from "../lib/projects";
import { recallSql } from "../lib/recall/retrieve";
import { DEFAULT_SETTINGS } from "../lib/settings/settings";
import { type PlanNode, planNodes, planOf } from "../tests/helpers/plan";
import { openBulkClient } from "./bulk-client";
import { bulkLoadPlan } from "./bulk-load";
import { copyBinary } from "./copy-binary";
import { benchEmbedding, startBenchProvider } from "./embedding";
import { factChunk, NOUNS } from "./fact-rows";
import { type Bench, benchService, memoryNow, percentile } from "./lib";
import { PGVECTOR_DEFAULT_BUILD } from "./recall";
import { buildVectorIndexes, entityCountFor, recallQueries } from "./seed";

/** Many tenants: `facts` facts over `datasets` datasets of `facts / datasets` each, in `projects` projects. */
export interface TenantsPlan {
  facts: number;
  datasets: number;
  projects: number;
  dims: number;
  build?: HnswBuild;
}

/** Recall in one dataset: its latency, its vector signal's recall@10 and what its statement read. */
export interface DatasetRecall {
  p50Ms: number;
  p99Ms: number;
  /**
   * The vector signal as recall searches (its 30 candidates' 10 nearest) against an exact scan of
   * the dataset's stored vectors (a fact as near as the exact 10th counts: many are equally near).
   */
  recallAt10: number;
  /** Shared buffers recall's statement touched (EXPLAIN BUFFERS, hit + read): other tenants' rows show here. */
  buffers: number;
  /** Rows the statement's plan nodes read from facts (index and heap), summed over the nodes. */
  factRowsRead: number;
}

export interface TenantsBenchResult extends TenantsPlan {
  factsPerDataset: number;
  /** Dataset t0 alone in the table, before the other tenants are loaded. */
  lone: DatasetRecall;
  /** The same dataset, the same queries, among every tenant. */
  amongMany: DatasetRecall;
  /** amongMany's p50 over lone's (budget ≤ 1.2). */
  ratio: number;
  loadSeconds: number;
  indexSeconds: number;
  memory: ReturnType<typeof memoryNow>;
}

const MEASURED = "t0";

/**
 * Recall in one small dataset among many (issue 34, item 3): dataset t0 of `facts / datasets`
 * facts, first alone in the table, then among every other tenant's (the datasets spread over
 * `projects` projects, t0 in the bench's), with the same queries: p50, the vector signal's
 * recall@10, and the buffers and fact rows its statement read. Every dataset's facts are distinct
 * (the seed's words and vectors by a global index), so no two tenants hold the same vectors.
 */
export async function benchTenants(plan: TenantsPlan, calls = 200): Promise<TenantsBenchResult> {
  const { facts, datasets, projects, dims } = plan;
  const build = plan.build ?? PGVECTOR_DEFAULT_BUILD;
  const per = Math.floor(facts / datasets);
  if (per < 1 || projects < 1 || projects > datasets) throw new Error("tenants: 1 ≤ projects ≤ datasets ≤ facts");
  const fake = await startBenchProvider();
  const env = { OPENAI_API_KEY: "bench", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: String(dims) };
  const bench = await benchService(env);
  try {
    const projectIds = [bench.projectId];
    for (let p = 1; p < projects; p++) projectIds.push((await createProject(bench.service.deps, { name: `p${p}` })).id);
    const owner = (d: number) => projectIds[d % projects] as string;
    const queries = recallQueries(calls, entityCountFor(per));
    const dataset = (d: number) => ({ projectId: owner(d), dataset: `t${d}`, from: d * per, to: (d + 1) * per });

    await bulkLoad(bench, dims, build, [dataset(0)]);
    const lone = await measure(bench, queries, dims);
    const started = performance.now();
    const others = Array.from({ length: datasets - 1 }, (_, k) => dataset(k + 1));
    const times = await bulkLoad(bench, dims, build, others);
    console.error(`bench: tenants loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const amongMany = await measure(bench, queries, dims);
    return {
      ...plan,
      build,
      factsPerDataset: per,
      lone,
      amongMany,
      ratio: amongMany.p50Ms / lone.p50Ms,
      ...times,
      memory: memoryNow(bench.database),
    };
  } finally {
    await bench.close();
    await fake.close();
  }
}

interface DatasetRows {
  projectId: string;
  dataset: string;
  /** The seed's global indexes of its facts (factWords, the vectors). */
  from: number;
  to: number;
}

/**
 * The datasets by COPY, their entities and facts (each fact touches one of its dataset's
 * entities), the facts' indexes and keys made again after it, the HNSW indexes built last, then
 * ANALYZE (as seedFacts loads; no episodes).
 */
async function bulkLoad(bench: Bench, dims: number, build: HnswBuild, sets: DatasetRows[]) {
  const client = await openBulkClient(bench);
  try {
    const started = performance.now();
    for (const table of EMBEDDED_TABLES) await client.query(`DROP INDEX IF EXISTS ${vectorIndexName(table, dims)}`);
    const bulk = await bulkLoadPlan(client, ["facts", "fact_entities"], ["hnsw"]);
    for (const statement of bulk.drop) await client.query(statement);
    const text = (value: string) => ({ text: value });
    // Entities of many datasets per COPY (a statement per dataset would cost more than its rows).
    const BATCH = 500;
    for (let b = 0; b < sets.length; b += BATCH) {
      const entities = sets.slice(b, b + BATCH).flatMap((s) =>
        Array.from({ length: entityCountFor(s.to - s.from) }, (_, e) => {
          const name = `${NOUNS[e % NOUNS.length]} club ${e}`;
          // The same names in every dataset (the queries name "club <n>"), each tenant's own vector.
          const vector = benchEmbedding(`${name} ${s.dataset}`, dims);
          return [...[`ent_${s.dataset}_${e}`, s.projectId, s.dataset, name, "ORG"].map(text), { halfvec: vector }];
        }),
      );
      await client.copy("entities (id, project_id, dataset, name, type, embedding)", "binary", copyBinary(entities));
    }
    for (const [k, s] of sets.entries()) {
      const chunk = factChunk({ ...s, entityCount: entityCountFor(s.to - s.from), dims });
      await client.copy(
        "facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)",
        "binary",
        chunk.facts,
      );
      await client.copy("fact_entities (fact_id, entity_id)", "csv", chunk.links);
      if ((k + 1) % 1000 === 0) console.error(`bench: tenants: ${k + 1} datasets loaded`);
    }
    await client.query("SET maintenance_work_mem = '512MB'");
    for (const statement of bulk.restore) await client.query(statement);
    await client.query("RESET maintenance_work_mem");
    const loadSeconds = (performance.now() - started) / 1000;
    const indexed = performance.now();
    await buildVectorIndexes(bench, dims, build, undefined, client);
    const indexSeconds = (performance.now() - indexed) / 1000;
    await client.query("ANALYZE");
    return { loadSeconds, indexSeconds };
  } finally {
    await client.close();
  }
}

/** Recall in dataset t0 of the bench's project: warm-up, `queries` timed, then its quality and reads. */
async function measure(bench: Bench, queries: string[], dims: number): Promise<DatasetRecall> {
  const db = bench.service.deps.db;
  // Past GENERIC_PLAN_RUNS, so the statement runs with a plan made on the tables as they are now.
  for (let i = 0; i < 60; i++) await bench.call("POST", "/v1/memory/recall", { dataset: MEASURED, query: `warm ${i}` });
  const latencies: number[] = [];
  for (const [i, query] of queries.entries()) {
    const started = performance.now();
    await bench.call("POST", "/v1/memory/recall", { dataset: MEASURED, query: `${query} ${i}` });
    latencies.push(performance.now() - started);
  }
  latencies.sort((a, b) => a - b);
  const [stats] = rowsOf<{ n: number | string }>(
    await db.execute(
      sql`SELECT docs AS n FROM fact_terms WHERE project_id = ${bench.projectId} AND dataset = ${MEASURED} AND term = ''`,
    ),
  );
  const n = Number(stats?.n ?? 0);
  const where = sql`f.project_id = ${bench.projectId} AND f.dataset = ${MEASURED} AND f.invalid_at IS NULL AND f.confidence >= 0.5`;
  const hits: number[] = [];
  for (const text of queries.slice(0, 50)) {
    const q = vectorParam(benchEmbedding(text, dims));
    const search = nearestSql({
      from: sql`facts f`,
      column: sql`f.embedding`,
      select: sql`f.id`,
      where,
      query: q,
      dims,
      ...searchLimitsFor(
        sql`30`,
        sql.raw(String(n)),
        dims,
        sql.raw(String(DEFAULT_SETTINGS.semantic.vectorSecondSearch)),
      ),
    });
    const found = await distances(db, sql`SELECT id, distance FROM (${search}) n ORDER BY distance + 0 LIMIT 10`);
    const exact = await distances(
      db,
      sql`SELECT id, (f.embedding::vector(${sql.raw(String(dims))}) <=> (${q})::vector(${sql.raw(String(dims))})) + 0 AS distance
        FROM facts f WHERE ${where} ORDER BY 2 LIMIT 10`,
    );
    const tenth = (exact.at(-1) ?? 0) + 1e-6;
    hits.push(found.filter((d) => d <= tenth).length / Math.max(1, Math.min(10, exact.length)));
  }
  const probe = queries[0] as string;
  const statement = recallSql(bench.service.deps, {
    projectId: bench.projectId,
    dataset: MEASURED,
    mode: "hybrid",
    query: probe,
    vector: benchEmbedding(probe, dims),
    facts: true,
    episodes: false,
  });
  const plan = planOf(await db.execute(sql`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement}`));
  return {
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    recallAt10: hits.reduce((a, b) => a + b, 0) / hits.length,
    buffers: (plan.Plan["Shared Hit Blocks"] ?? 0) + (plan.Plan["Shared Read Blocks"] ?? 0),
    factRowsRead: factRows(plan.Plan),
  };
}

async function distances(db: Bench["service"]["deps"]["db"], statement: SQL): Promise<number[]> {
  return rowsOf<{ distance: number | string }>(await db.execute(statement)).map((r) => Number(r.distance));
}

/** Rows the plan's scans of facts produced or filtered out, over all their loops. */
const factRows = (plan: PlanNode) =>
  planNodes(plan)
    .filter((n) => n["Relation Name"] === "facts")
    .reduce(
      (sum, n) =>
        sum +
        ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0) + (n["Rows Removed by Index Recheck"] ?? 0)) *
          (n["Actual Loops"] ?? 0),
      0,
    );

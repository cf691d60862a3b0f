import { type SQL, sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { EMBEDDED_TABLES, type HnswBuild, vectorIndexName } from "../lib/db/vector-indexes";
import { nearestSql, searchLimitsFor, vectorParam } from "../lib/db/vectors";
import { addTermsSql } from "../lib/evidence/terms";
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
import { messageText, withMessageIndexesRebuilt } from "./messages-seed";
import { PGVECTOR_DEFAULT_BUILD } from "./recall";
import { buildVectorIndexes, entityCountFor, recallQueries } from "./seed";

/** Many tenants: `facts` facts over `datasets` datasets of `facts / datasets` each, in `projects` projects. */
export interface TenantsPlan {
  facts: number;
  datasets: number;
  projects: number;
  dims: number;
  build?: HnswBuild;
  /** Conversation messages in every dataset too (none unless given): recall is then timed with them as well. */
  messagesPerDataset?: number;
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
  /**
   * With messages seeded: recall with `include: ["messages"]`, timed alternately with the calls
   * above, and the rows its statement read from the messages' index tables (other tenants' show here).
   */
  withMessages?: { p50Ms: number; p99Ms: number; messageRowsRead: number };
}

export interface TenantsBenchResult extends TenantsPlan {
  factsPerDataset: number;
  /** Dataset t0 alone in the table, before the other tenants are loaded. */
  lone: DatasetRecall;
  /** The same dataset, the same queries, among every tenant. */
  amongMany: DatasetRecall;
  /** amongMany's p50 over lone's (budget ≤ 1.2). */
  ratio: number;
  /** The same with messages included, when seeded. */
  messagesRatio?: number;
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

    const messages = plan.messagesPerDataset ?? 0;
    await bulkLoad(bench, dims, build, [dataset(0)]);
    if (messages) await seedTenantMessages(bench, dims, build, [dataset(0)], messages);
    const lone = await measure(bench, queries, dims, messages > 0);
    const started = performance.now();
    const others = Array.from({ length: datasets - 1 }, (_, k) => dataset(k + 1));
    const times = await bulkLoad(bench, dims, build, others);
    if (messages) await seedTenantMessages(bench, dims, build, others, messages);
    console.error(`bench: tenants loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const amongMany = await measure(bench, queries, dims, messages > 0);
    return {
      ...plan,
      build,
      factsPerDataset: per,
      lone,
      amongMany,
      ratio: amongMany.p50Ms / lone.p50Ms,
      ...(amongMany.withMessages && lone.withMessages
        ? { messagesRatio: amongMany.withMessages.p50Ms / lone.withMessages.p50Ms }
        : {}),
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

/**
 * `count` user messages in each of `sets` (a thread each), indexed, counted and embedded as the
 * thread's jobs leave them (bench/messages-seed.ts's sentences, by a global index so no two
 * tenants hold the same); the keyword and HNSW indexes made again after the rows.
 */
async function seedTenantMessages(bench: Bench, dims: number, build: HnswBuild, sets: DatasetRows[], count: number) {
  const db = bench.service.deps.db;
  const started = performance.now();
  // Datasets per statement: their rows in one JSON parameter the WASM heap holds.
  const BATCH = Math.max(1, Math.floor(5_000 / count));
  await withMessageIndexesRebuilt(db, dims, build, async () => {
    for (let b = 0; b < sets.length; b += BATCH) {
      const rows = sets.slice(b, b + BATCH).flatMap((s) =>
        Array.from({ length: count }, (_, i) => {
          const g = s.from * count + i;
          const content = messageText(g);
          const vector = `[${benchEmbedding(content, dims).join(",")}]`;
          return { id: `msg_tn_${s.dataset}_${i}`, p: s.projectId, d: s.dataset, seq: i + 1, content, vector };
        }),
      );
      const owners = sets.slice(b, b + BATCH).map((s) => ({ p: s.projectId, d: s.dataset }));
      await db.execute(sql`INSERT INTO threads (id, project_id, dataset, last_seq, live_count, last_message_at, created_at, updated_at)
      SELECT 'thr_tn_' || d, p, d, ${count}::int, ${count}::int, now(), now(), now()
      FROM jsonb_to_recordset(${JSON.stringify(owners)}::jsonb) AS o(p text, d text)`);
      const at = sql`now() - make_interval(secs => ${count}::int - x.seq)`;
      await db.execute(sql`
      WITH x AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
          AS x(id text, p text, d text, seq int, content text, vector text)),
        m AS (INSERT INTO messages (id, project_id, thread_id, seq, role, content, created_at)
          SELECT id, p, 'thr_tn_' || d, seq, 'user', content, ${at} FROM x),
        s AS (INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search, terms_counted)
          SELECT id, p, 'thr_tn_' || d, d, ${at}, to_tsvector('english', content), true FROM x
          RETURNING project_id, dataset, search),
        counted AS (${addTermsSql(sql`s`)})
      INSERT INTO message_vectors (message_id, project_id, thread_id, dataset, created_at, embedding)
      SELECT id, p, 'thr_tn_' || d, d, ${at}, vector::halfvec FROM x`);
    }
  });
  await db.execute(sql`ANALYZE message_search, message_vectors, message_terms`);
  console.error(
    `bench: tenants: ${sets.length * count} messages seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}

/**
 * Recall in dataset t0 of the bench's project: warm-up, `queries` timed (with `messages`, each
 * query also with messages included, alternately), then its quality and reads.
 */
async function measure(bench: Bench, queries: string[], dims: number, messages = false): Promise<DatasetRecall> {
  const db = bench.service.deps.db;
  const recall = (query: string, include?: string[]) =>
    bench.call("POST", "/v1/memory/recall", { dataset: MEASURED, query, ...(include ? { include } : {}) });
  // Past GENERIC_PLAN_RUNS, so the statement runs with a plan made on the tables as they are now.
  for (let i = 0; i < 60; i++) {
    await recall(`warm ${i}`);
    if (messages) await recall(`warm ${i}`, ["messages"]);
  }
  const latencies: number[] = [];
  const withMessages: number[] = [];
  const timed = async (into: number[], work: () => Promise<unknown>) => {
    const started = performance.now();
    await work();
    into.push(performance.now() - started);
  };
  for (const [i, query] of queries.entries()) {
    // Each query embedded once per variant (a new text each time), in turn first.
    const plain = () => timed(latencies, () => recall(`${query} ${i}`));
    const included = () => timed(withMessages, () => recall(`${query} ${i} m`, ["messages"]));
    if (!messages) await plain();
    else if (i % 2) await included().then(plain);
    else await plain().then(included);
  }
  latencies.sort((a, b) => a - b);
  withMessages.sort((a, b) => a - b);
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
  const probeSql = (withMessages: boolean) =>
    recallSql(bench.service.deps, {
      projectId: bench.projectId,
      dataset: MEASURED,
      mode: "hybrid",
      query: probe,
      vector: benchEmbedding(probe, dims),
      facts: true,
      episodes: false,
      messages: withMessages,
    });
  const plan = planOf(await db.execute(sql`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${probeSql(false)}`));
  const messagePlan = messages
    ? planOf(await db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${probeSql(true)}`))
    : undefined;
  return {
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    recallAt10: hits.reduce((a, b) => a + b, 0) / hits.length,
    buffers: (plan.Plan["Shared Hit Blocks"] ?? 0) + (plan.Plan["Shared Read Blocks"] ?? 0),
    factRowsRead: rowsRead(plan.Plan, ["facts"]),
    ...(messagePlan
      ? {
          withMessages: {
            p50Ms: percentile(withMessages, 50),
            p99Ms: percentile(withMessages, 99),
            messageRowsRead: rowsRead(messagePlan.Plan, ["message_search", "message_vectors"]),
          },
        }
      : {}),
  };
}

async function distances(db: Bench["service"]["deps"]["db"], statement: SQL): Promise<number[]> {
  return rowsOf<{ distance: number | string }>(await db.execute(statement)).map((r) => Number(r.distance));
}

/** Rows the plan's scans of `tables` produced or filtered out, over all their loops. */
const rowsRead = (plan: PlanNode, tables: string[]) =>
  planNodes(plan)
    .filter((n) => tables.includes(n["Relation Name"] ?? ""))
    .reduce(
      (sum, n) =>
        sum +
        ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0) + (n["Rows Removed by Index Recheck"] ?? 0)) *
          (n["Actual Loops"] ?? 0),
      0,
    );

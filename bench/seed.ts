import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Worker } from "node:worker_threads";
import { sql } from "drizzle-orm";
import type { PgliteDurability } from "../lib/db/pglite-durability";
import { rowsOf } from "../lib/db/rows";
import { EMBEDDED_TABLES, type HnswBuild, vectorIndexName, vectorIndexSql } from "../lib/db/vector-indexes";
import { type BulkClient, openBulkClient } from "./bulk-client";
import { bulkLoadPlan } from "./bulk-load";
import { type CopyField, copyBinary } from "./copy-binary";
import { benchEmbedding } from "./embedding";
import { ADJECTIVES, FACT_COLUMNS, type FactChunk, type FactChunkRequest, NOUNS } from "./fact-rows";
import { type Bench, benchDatabaseOptions, benchService, memoryNow } from "./lib";

/** Entities per dataset for `liveFacts` facts (each fact touches one). */
export const entityCountFor = (liveFacts: number) => Math.max(10, Math.floor(liveFacts / 50));

/** Distinct recall queries (so the embedding cache never answers) naming seeded words and entities. */
export const recallQueries = (count: number, entityCount: number) =>
  Array.from(
    { length: count },
    (_, i) =>
      `what about ${ADJECTIVES[(i * 3) % ADJECTIVES.length]} ${NOUNS[(i * 5) % NOUNS.length]} and the ${NOUNS[(i * 7) % NOUNS.length]} club ${i % entityCount}, question ${i}`,
  );

/** pgvector's text form; 7 significant digits is what a real (float4) column keeps anyway. */
export const vectorText = (v: number[]) => `[${v.map((x) => (x === 0 ? "0" : x.toPrecision(7))).join(",")}]`;

/** One CSV field: quoted when it holds a comma, quote or newline. */
const csv = (value: string) => (/[",\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value);

/** Rows per COPY: large enough to amortise the statement, small enough to keep the CSV text modest. */
const CHUNK = 20_000;

/** What a seeded database holds: `facts` in dataset "big" and `neighbours` in dataset "neighbour". */
export interface SeedPlan {
  facts: number;
  neighbours: number;
  dims: number;
  build: HnswBuild;
}

export interface SeedResult {
  projectId: string;
  entityCount: number;
  /** The COPY and making the tables' other indexes and keys again after it (restoreSeconds). */
  loadSeconds: number;
  /** Of loadSeconds, making the B-tree and GIN indexes and the keys again after the COPY. */
  restoreSeconds?: number;
  indexSeconds: number;
  /**
   * This process's CPU time for the load and for the index build (s): PGlite runs Postgres on
   * this thread, so on a loaded machine these say what the wall times would be on a quiet one.
   */
  loadCpuSeconds?: number;
  indexCpuSeconds?: number;
  /** The WASM memory after the index build (MiB): the graph is built inside it. */
  wasmMiBAfterBuild?: number;
  /** What the HNSW builds said (pgvector's notice when its graph outgrew maintenance_work_mem). */
  buildNotices?: string[];
  /** The database's `shared_buffers` during the load (see openSeeded). */
  sharedBuffers?: string;
  /** True when a kept directory (--data-dir) already held this seed: the times are its first load's. */
  reused?: boolean;
}

/** Where a seeded bench database lives: in memory unless `dir` (its parent holds seed.json when kept). */
export interface SeedStore {
  dir?: string;
  durability?: PgliteDurability;
  /** Keep the directory and reuse it when it already holds this plan's seed (--data-dir). */
  keep?: boolean;
}

/**
 * A bench service on a database seeded with `plan`: a kept directory that already holds the
 * same seed is opened as it is (with a new API key for its project); otherwise it is seeded now,
 * and the seed recorded beside a kept directory.
 */
export async function openSeeded(
  plan: SeedPlan,
  env: Record<string, string>,
  store: SeedStore = {},
): Promise<{ bench: Bench; seed: SeedResult }> {
  const record = store.dir && store.keep ? join(dirname(store.dir), "seed.json") : undefined;
  const saved = record ? savedSeed(record, store.dir as string, plan) : undefined;
  const disk = store.dir ? { dir: store.dir, durability: store.durability ?? "full" } : undefined;
  if (saved) {
    const bench = await benchService(env, disk, { projectId: saved.projectId });
    return { bench, seed: { ...saved, reused: true } };
  }
  // A large PGlite pool makes COPY tens of times slower and the HNSW build run out of WASM memory
  // (1.1 million facts with 1200MB: 3,523 s against 83 s, bench/RESULTS.md), so a directory is
  // loaded with the default pool and opened again with --shared-buffers' pool for the measurement.
  const reopen = Boolean(disk && benchDatabaseOptions.sharedBuffers);
  const bench = await benchService(env, disk, { defaultPool: reopen });
  let seed: SeedResult;
  try {
    seed = await seedFacts(bench, plan);
    if (record) writeFileSync(record, `${JSON.stringify({ plan, seed }, null, 2)}\n`);
  } catch (err) {
    await bench.close();
    throw err;
  }
  if (!reopen) return { bench, seed };
  await bench.close();
  return { bench: await benchService(env, disk, { projectId: seed.projectId }), seed };
}

/** The seed a kept directory holds, if it is `plan`'s; a directory with another or no record is refused. */
function savedSeed(record: string, dir: string, plan: SeedPlan): SeedResult | undefined {
  if (!existsSync(record)) {
    if (existsSync(dir)) throw new Error(`${dir} holds a database without ${record} (an interrupted load?): remove it`);
    return undefined;
  }
  const saved = JSON.parse(readFileSync(record, "utf8")) as { plan: SeedPlan; seed: SeedResult };
  if (JSON.stringify(saved.plan) !== JSON.stringify(plan)) {
    throw new Error(`${dir} holds ${JSON.stringify(saved.plan)}, not ${JSON.stringify(plan)}: use another --data-dir`);
  }
  return saved.seed;
}

/** User + system CPU time of this process so far (s). */
const cpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

/** The neighbour dataset's size for `facts` facts and a share (--neighbours). */
export const neighboursFor = (facts: number, share: number) => Math.round(facts * share);

/**
 * Loads `plan.facts` facts into dataset "big" and `plan.neighbours` into "neighbour" (same
 * project and table, so every search is filtered), with their entities, fact_entities and 50
 * episodes each, by COPY (the fastest bulk path PGlite has: no JSON, no per-row statement, vectors
 * in binary; on a server the same bytes go as COPY FROM STDIN, bench/pg-copy.ts). The facts' and
 * links' other indexes and keys are dropped during the COPY and made again after it
 * (bulkLoadPlan), the HNSW indexes built last (buildVectorIndexes).
 */
export async function seedFacts(bench: Bench, plan: SeedPlan): Promise<SeedResult> {
  const { dims } = plan;
  const db = bench.service.deps.db;
  const thread = await bench.call("POST", "/v1/threads", { dataset: "big" });
  const [{ project_id: projectId }] = rowsOf<{ project_id: string }>(
    await db.execute(sql`SELECT project_id FROM threads WHERE id = ${thread.threadId as string}`),
  );
  const started = performance.now();
  const cpuStarted = cpuSeconds();
  for (const table of EMBEDDED_TABLES)
    await db.execute(sql.raw(`DROP INDEX IF EXISTS ${vectorIndexName(table, dims)}`));
  const client = await openBulkClient(bench);
  let restoreSeconds: number;
  let loadSeconds: number;
  let buildNotices: string[];
  let indexed: number;
  let cpuIndexed: number;
  try {
    const bulk = await bulkLoadPlan(client, BULK_TABLES, ["hnsw"]);
    for (const statement of bulk.drop) await client.query(statement);
    const entityCount = entityCountFor(plan.facts);
    for (const [dataset, count] of [
      ["big", plan.facts],
      ["neighbour", plan.neighbours],
    ] as const) {
      if (count > 0) await copyDataset(client, { projectId, dataset, count, entityCount, dims });
    }
    const restoring = performance.now();
    console.error(`bench: copied in ${((restoring - started) / 1000).toFixed(1)} s; making the indexes and keys again`);
    // The B-tree and GIN builds sort in memory when it is large enough (in WASM memory the HNSW
    // build reuses afterwards).
    await client.query(`SET maintenance_work_mem = '${RESTORE_MEMORY}'`);
    for (const statement of bulk.restore) await client.query(statement);
    await client.query("RESET maintenance_work_mem");
    restoreSeconds = (performance.now() - restoring) / 1000;
    loadSeconds = (performance.now() - started) / 1000;
    indexed = performance.now();
    cpuIndexed = cpuSeconds();
    console.error(`bench: loaded in ${loadSeconds.toFixed(1)} s; building the HNSW indexes`);
    buildNotices = await buildVectorIndexes(bench, dims, plan.build, undefined, client);
  } finally {
    await client.close();
  }
  const indexSeconds = (performance.now() - indexed) / 1000;
  const indexCpuSeconds = cpuSeconds() - cpuIndexed;
  const wasmMiBAfterBuild = memoryNow(bench.database).wasmMiB;
  await db.execute(sql`ANALYZE`);
  const loadCpuSeconds = cpuIndexed - cpuStarted;
  const [{ shared_buffers: sharedBuffers }] = rowsOf<{ shared_buffers: string }>(
    await db.execute(sql`SHOW shared_buffers`),
  );
  return {
    projectId,
    sharedBuffers,
    entityCount: entityCountFor(plan.facts),
    loadSeconds,
    restoreSeconds,
    indexSeconds,
    loadCpuSeconds,
    indexCpuSeconds,
    wasmMiBAfterBuild,
    buildNotices,
  };
}

/**
 * One dataset's rows by COPY: its entities, `count` facts with their links, and 50 episodes. The
 * rows with vectors go in COPY's binary format (copyBinary: no float parsing in the database).
 */
async function copyDataset(
  client: BulkClient,
  at: { projectId: string; dataset: string; count: number; entityCount: number; dims: number },
) {
  const { projectId, dataset, count, dims } = at;
  const copyBytes = (target: string, format: "csv" | "binary", bytes: Uint8Array<ArrayBuffer>) =>
    client.copy(target, format, bytes);
  const copy = (table: string, columns: string, lines: string[]) =>
    copyBytes(`${table} (${columns})`, "csv", new TextEncoder().encode(lines.join("\n")));
  const copyRows = (table: string, columns: string, rows: CopyField[][]) =>
    copyBytes(`${table} (${columns})`, "binary", copyBinary(rows));
  const text = (value: string) => ({ text: value });
  // A small neighbour dataset gets as many entities as its own size calls for.
  const entityCount = Math.min(at.entityCount, entityCountFor(count));
  const entities = Array.from({ length: entityCount }, (_, e) => {
    const name = `${NOUNS[e % NOUNS.length]} club ${e}`;
    return [
      ...[`ent_${dataset}_${e}`, projectId, dataset, name, "ORG"].map(text),
      { halfvec: benchEmbedding(name, dims) },
    ];
  });
  await copyRows("entities", "id, project_id, dataset, name, type, embedding", entities);
  const chunks = new FactChunks();
  try {
    const request = (from: number) =>
      chunks.make({ projectId, dataset, from, to: Math.min(from + CHUNK, count), entityCount, dims });
    let next = request(0);
    for (let done = 0; done < count; done += CHUNK) {
      const chunk = await next;
      // The next chunk is made on the worker while this one is copied.
      if (done + CHUNK < count) next = request(done + CHUNK);
      await copyBytes(`facts (${FACT_COLUMNS})`, "binary", chunk.facts);
      await copyBytes("fact_entities (fact_id, entity_id)", "csv", chunk.links);
      // A long load says how far it has got (every 100,000 rows).
      if (Math.floor((done + CHUNK) / 100_000) > Math.floor(done / 100_000))
        console.error(`bench: ${dataset}: ${Math.min(done + CHUNK, count).toLocaleString("en")} facts loaded`);
    }
  } finally {
    await chunks.close();
  }
  const episodes = Array.from({ length: 50 }, (_, k) => {
    const s = `The user talked about ${NOUNS[k % NOUNS.length]} and ${ADJECTIVES[k % ADJECTIVES.length]} things`;
    const t = new Date(Date.UTC(2025, 0, 1) + k * 86_400_000).toISOString();
    const v = csv(vectorText(benchEmbedding(s, dims)));
    return `epi_${dataset}_${k},${projectId},thr_bench,${dataset},completed,completed,${s},2,1,2,${t},${t},${v}`;
  });
  await copy(
    "episodes",
    "id, project_id, thread_id, dataset, status, semantic_status, summary, message_count, from_seq, to_seq, started_at, ended_at, embedding",
    episodes,
  );
}

/**
 * Chunks of seeded facts made on a worker thread, one ahead of the COPY. Making the rows (hashing
 * words, turning vectors, encoding them) is the bench's own synthetic data, not the database's
 * work, and cost about a third of the COPY's time; on the machine's other core it overlaps it.
 */
class FactChunks {
  // tsx for the worker too, whoever started this process (the bench, or vitest).
  private readonly worker = new Worker(new URL("./fact-rows-worker.ts", import.meta.url), {
    execArgv: ["--import", "tsx"],
  });
  private readonly waiting: { resolve: (chunk: FactChunk) => void; reject: (err: unknown) => void }[] = [];

  constructor() {
    // The worker answers in the order it was asked.
    this.worker.on("message", (chunk: FactChunk) => this.waiting.shift()?.resolve(chunk));
    this.worker.on("error", (err) => {
      for (const w of this.waiting.splice(0)) w.reject(err);
    });
  }

  make(request: FactChunkRequest): Promise<FactChunk> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.worker.postMessage(request);
    });
  }

  close() {
    return this.worker.terminate();
  }
}

/** The tables a million facts go into, loaded without their indexes and keys (bulkLoadPlan). */
const BULK_TABLES = ["facts", "fact_entities"];

/** maintenance_work_mem for making the B-tree and GIN indexes again after the COPY. */
const RESTORE_MEMORY = "512MB";

/**
 * maintenance_work_mem for the index builds. pgvector builds the graph in memory while it fits
 * this budget (about 1.2 KB per row at 256 dims, m 16) and falls back to inserting into the
 * on-disk index after that, many times slower. The graph lives in PGlite's WASM memory, which
 * cannot grow past 2 GiB (its module's maximum), so the budget is what is left of 2 GiB after
 * shared_buffers and the backend's own ~200 MB: about 1.3 million rows at 256 dims.
 */
export const HNSW_BUILD_MEMORY = "1600MB";

/**
 * The same on a PostgreSQL server: a million facts and as many neighbours (about 2.4 GB of graph
 * at 256 dims) built in memory. The server allocates it only during the build.
 */
export const SERVER_HNSW_BUILD_MEMORY = "3GB";

/**
 * The HNSW indexes as lib/db/vector-indexes.ts defines them (same names, expression and
 * predicate, so recall's plans use them), with the given build parameters. The graph is built in
 * memory when it fits maintenance_work_mem (much faster); the setting is put back afterwards,
 * though the WASM memory it grew stays with the process (embedded). On a server, outside WASM's
 * 2 GiB, the budget is SERVER_HNSW_BUILD_MEMORY unless `memory` is given, and the server's
 * parallel workers help (max_parallel_maintenance_workers). Gives what the builds said. Runs on
 * `client` when given (a load's session), else on a session of its own.
 */
export async function buildVectorIndexes(
  bench: Bench,
  dims: number,
  build: HnswBuild,
  memory = bench.server ? SERVER_HNSW_BUILD_MEMORY : HNSW_BUILD_MEMORY,
  client?: BulkClient,
): Promise<string[]> {
  if (!client) {
    const own = await openBulkClient(bench);
    try {
      return await buildVectorIndexes(bench, dims, build, memory, own);
    } finally {
      await own.close();
    }
  }
  // pgvector says in a notice when the graph outgrows maintenance_work_mem and the rest of the
  // rows go into the on-disk index, many times slower a row.
  const notices: string[] = [];
  const onNotice = (message: string) => {
    notices.push(message);
    console.error(`bench: the index build says: ${message}`);
  };
  await client.query(`SET maintenance_work_mem = '${memory}'`);
  for (const table of EMBEDDED_TABLES) {
    await client.query(`DROP INDEX IF EXISTS ${vectorIndexName(table, dims)}`);
    await client.queryWithNotices(vectorIndexSql(table, dims, build), onNotice);
  }
  await client.query("RESET maintenance_work_mem");
  return notices;
}

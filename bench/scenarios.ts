import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { vectorIndexName } from "../lib/db/vector-indexes";
import { benchAddBatch } from "./add-batch";
import { benchAddMessage } from "./add-message";
import type { BenchArgs, Scenario } from "./args";
import { benchDurability } from "./durability";
import { startBenchProvider } from "./embedding";
import { benchEpisodes } from "./episodes";
import { benchHnsw } from "./hnsw";
import { type Bench, memoryNow } from "./lib";
import { benchPrepare } from "./prepare";
import { benchRecall } from "./recall";
import { neighboursFor, openSeeded, type SeedPlan, type SeedResult, type SeedStore } from "./seed";
import { benchSemantic } from "./semantic";
import { benchServerRss, serverRssRows } from "./server-rss";
import { benchTenants } from "./tenants";

/** One run of a scenario in its own process: at one size and dimension where it has them. */
export interface Unit {
  scenario: Scenario;
  facts?: number;
  dims?: number;
}

export interface UnitResult {
  unit: Unit;
  rows: string[];
  result: unknown;
}

/** The units `args` asks for, in order: the sized scenarios once per size and dimension. */
export function unitsOf(args: BenchArgs): Unit[] {
  const sized = new Set<Scenario>([
    "semantic",
    "recall",
    "recall-messages",
    "recall-episodes",
    "hnsw",
    "load",
    "server-rss",
    "tenants",
  ]);
  return args.only.flatMap((scenario) =>
    sized.has(scenario)
      ? args.dims.flatMap((dims) => args.facts.map((facts) => ({ scenario, facts, dims })))
      : [{ scenario }],
  );
}

const n = (x: number) => x.toLocaleString("en");
const ms = (x: number, digits = 2) => x.toFixed(digits);

/**
 * Runs `fn` with where its seeded database goes: the kept --data-dir, a fresh temporary directory
 * with --disk (removed afterwards), else in memory; with --database-url, a database of its own on
 * that server (benchService makes it; the parser refuses --disk and --data-dir with it).
 */
async function withStore<T>(args: BenchArgs, fn: (store: SeedStore) => Promise<T>): Promise<T> {
  if (args.databaseUrl) return fn({});
  if (args.dataDir) {
    const dir = resolve(args.dataDir);
    mkdirSync(dir, { recursive: true });
    return fn({ dir: join(dir, "pglite"), keep: true });
  }
  if (!args.disk) return fn({});
  const dir = mkdtempSync(join(tmpdir(), "memsvc-bench-"));
  try {
    return await fn({ dir: join(dir, "pglite") });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

type Runner = (unit: Required<Unit>, args: BenchArgs) => Promise<{ rows: string[]; result: unknown }>;

const RUNNERS: Record<Scenario, Runner> = {
  "add-message": async (_u, args) => {
    const { runs, ops } = effort(args);
    const results = [];
    const rows = [];
    for (const clients of [1, 8, 32]) {
      const r = await benchAddMessage(clients, ops, runs);
      results.push(r);
      rows.push(
        `| add message, ${clients} client${clients > 1 ? "s" : ""} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${Math.round(r.messagesPerSecond)} msg/s | ${r.statementsPerRequest.toFixed(1)} SQL statements |`,
      );
    }
    return { rows, result: results };
  },
  // On disk, durable (the default) against fsync off: the cost of an acknowledged write on disk.
  durability: async (_u, args) => {
    const { runs } = effort(args);
    const results = [];
    const rows = [];
    for (const transport of ["in-process", "http"] as const) {
      for (const clients of [1, 8]) {
        for (const mode of ["full", "fast"] as const) {
          const r = await benchDurability(mode, transport, clients, args.quick ? 300 : 1000, runs);
          results.push(r);
          rows.push(
            `| add message on disk, PGLITE_DURABILITY=${mode}, ${transport}, ${clients} client${clients > 1 ? "s" : ""} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${Math.round(r.messagesPerSecond)} msg/s | ${r.fsyncsPerWrite.toFixed(2)} fsync/write |`,
          );
        }
      }
    }
    return { rows, result: results };
  },
  "add-batch": async (_u, args) => {
    const { runs } = effort(args);
    const results = [];
    const rows = [];
    for (const storage of ["disk", "memory"] as const) {
      const r = await benchAddBatch(storage, 100, 1, args.quick ? 20 : 50, runs);
      results.push(r);
      rows.push(
        `| add messages in batches of 100 (messages:batch), http, 1 client, ${storage === "disk" ? "on disk, PGLITE_DURABILITY=full" : "in memory"} | ${ms(r.p50Ms)} per batch | ${ms(r.p99Ms)} per batch | ${Math.round(r.messagesPerSecond)} msg/s | ${r.statementsPerRequest.toFixed(1)} SQL statements per batch |`,
      );
    }
    return { rows, result: results };
  },
  prepare: async (_u, args) => {
    const results = [];
    const rows = [];
    for (const compacted of [false, true]) {
      const r = await benchPrepare(10_000, compacted, args.quick ? 100 : 300);
      results.push(r);
      rows.push(
        `| prepare (messageLimit 20), thread of 10,000 messages${compacted ? ", all but 6 compacted" : ""} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | | ${r.statementsPerPrepare.toFixed(1)} SQL statements (auth + prepare) |`,
      );
    }
    return { rows, result: results };
  },
  episodes: async (_u, args) => {
    const results = [];
    const rows = [];
    for (const [threads, latency] of [
      [args.quick ? 60 : 200, { chat: 0, embeddings: 0 }],
      [args.quick ? 20 : 50, { chat: 800, embeddings: 150 }],
    ] as const) {
      const runsOf = [];
      for (let r = 0; r < (args.quick ? 1 : 3); r++) runsOf.push(await benchEpisodes(threads, latency));
      const r = runsOf.sort((a, b) => a.seconds - b.seconds)[Math.floor(runsOf.length / 2)];
      results.push(r);
      const provider = latency.chat ? `chat ${latency.chat} ms, embeddings ${latency.embeddings} ms` : "provider 0 ms";
      rows.push(
        `| episode pipeline, ${threads} threads ended at once, ${provider} | | | ${r.episodesPerSecond.toFixed(1)} episodes/s, all done in ${r.seconds.toFixed(2)} s | ${r.chatCallsPerEpisode.toFixed(2)} model calls (summary, extraction) + ${r.embeddingBatchesPerEpisode.toFixed(2)} embedding batch/episode |`,
      );
    }
    return { rows, result: results };
  },
  semantic: async ({ facts, dims }) => {
    const r = await benchSemantic(facts, 30, dims);
    return {
      rows: [
        `| fact extraction, 30 new facts vs ${n(facts)} live facts (${r.dimensions} dims), provider 0 ms | ${ms(r.extractionMs, 0)} | | | ${r.modelCalls} model + ${r.embeddingBatches} embedding call(s) |`,
      ],
      result: r,
    };
  },
  recall: ({ facts, dims }, args) =>
    withStore(args, async (store) => {
      const neighbours = neighboursFor(facts, args.neighbours);
      const build = { m: args.m, efConstruction: args.efConstruction };
      const r = await benchRecall(facts, {
        calls: args.quick ? 100 : 200,
        dims,
        store,
        neighbours,
        build,
        secondSearch: args.secondSearch,
      });
      const at = `${n(facts)} live facts${neighbours === facts ? "" : ` + ${n(neighbours)} neighbours`} (${r.dimensions} dims)`;
      const cost = `${r.statementsPerRecall} SQL statements (auth + recall)`;
      const c = r.cold;
      const coldRow = c
        ? [
            `| recall, with query, ${at}, cold: ${c.clusterRestarted ? `cluster restarted${c.osCacheDropped ? ", OS page cache dropped" : " (OS page cache kept)"}` : "new connections only (shared buffers and OS page cache kept)"}, no warm-up | ${ms(c.p50Ms, 1)} | ${ms(c.p99Ms, 1)} | | the first call ${ms(c.firstMs, 1)} ms; the rows above are warm |`,
          ]
        : [];
      return {
        rows: [
          `| recall, no query, ${at} | ${ms(r.noQuery.p50Ms, 1)} | ${ms(r.noQuery.p99Ms, 1)} | | ${cost} |`,
          `| recall, with query, ${at}, provider 0 ms | ${ms(r.withQuery.p50Ms, 1)} | ${ms(r.withQuery.p99Ms, 1)} | | ${cost}, ${r.embeddingCallsPerQuery} embedding call; vector recall@10 ${r.recallAt10.toFixed(3)} (against the stored vectors: ${r.recallAt10Stored.toFixed(3)}; the 10 found ${r.distanceRatio.toFixed(4)}× the true 10's distance; HNSW ${r.hnswIndexUsed ? "used" : "NOT used"}, ef_search ${r.efSearch}, ${r.rowsSearched} rows read for 30); ${Math.round(r.bytesPerFact)} bytes on disk per fact; loaded in ${r.loadSeconds.toFixed(1)} s + index ${r.indexSeconds.toFixed(1)} s |`,
          `| recall, with query + raw + episodes, ${at} | ${ms(r.withQueryAndEpisodes.p50Ms, 1)} | ${ms(r.withQueryAndEpisodes.p99Ms, 1)} | | ${cost} |`,
          `| recall with query beside the bare HNSW top-8 statement, ${at}, alternately | ${ms(r.closeToIndex.recallP50Ms, 2)} (bare: ${ms(r.closeToIndex.bareP50Ms, 2)}) | | | **${r.closeToIndex.ratio.toFixed(1)}×** the bare statement; the query's vector cached: ${ms(r.closeToIndex.cachedP50Ms, 2)}, **${r.closeToIndex.cachedRatio.toFixed(1)}×**; by CPU time ${ms(r.closeToIndex.cpu.recallMs, 2)} / ${ms(r.closeToIndex.cpu.cachedMs, 2)} / ${ms(r.closeToIndex.cpu.bareMs, 2)} ms: **${r.closeToIndex.cpu.ratio.toFixed(1)}×** / **${r.closeToIndex.cpu.cachedRatio.toFixed(1)}×**${args.databaseUrl ? " (CPU time: this process's only, not the server's)" : ""} |`,
          ...coldRow,
        ],
        result: r,
      };
    }),
  // Conversation evidence at scale: the same recall, then with 200k messages seeded and included.
  "recall-messages": async ({ facts, dims }, args) => {
    const messages = args.quick ? 20_000 : 200_000;
    const build = { m: args.m, efConstruction: args.efConstruction };
    const r = await benchRecall(facts, { calls: args.quick ? 100 : 200, dims, build, messages });
    const m = r.withMessages as NonNullable<typeof r.withMessages>;
    const at = `${n(facts)} live facts (${r.dimensions} dims)`;
    const bytes = m.bytesPerMessage;
    return {
      rows: [
        `| recall, with query, ${at}, no messages | ${ms(r.withQuery.p50Ms, 1)} | ${ms(r.withQuery.p99Ms, 1)} | | ${r.statementsPerRecall} SQL statements |`,
        `| recall, with query + messages, ${at} + ${n(messages)} messages | ${ms(m.withQuery.p50Ms, 1)} | ${ms(m.withQuery.p99Ms, 1)} | | ${m.statementsPerRecall} SQL statements; ${(m.withQuery.p50Ms / r.withQuery.p50Ms).toFixed(2)}× without messages |`,
        `| recall with query, without and with messages alternately, ${at} + ${n(messages)} messages | ${ms(m.alternately.withP50Ms, 1)} (without: ${ms(m.alternately.withoutP50Ms, 1)}) | | | **${m.alternately.ratio.toFixed(2)}×** without messages (budget 1.5×) |`,
        `| recall, no query + messages, ${at} + ${n(messages)} messages | ${ms(m.noQuery.p50Ms, 1)} | ${ms(m.noQuery.p99Ms, 1)} | | bytes per message: row ${Math.round(bytes.message)}, keyword index ${Math.round(bytes.search)}, statistics ${Math.round(bytes.terms)}, vector ${Math.round(bytes.vector)}; seeded in ${m.seedSeconds.toFixed(0)} s |`,
      ],
      result: r,
    };
  },
  // A dataset of many conversations: its episodes ranked beside the facts (include episodes).
  "recall-episodes": async ({ facts, dims }, args) => {
    const episodes = args.quick ? 2_000 : 10_000;
    const build = { m: args.m, efConstruction: args.efConstruction };
    const r = await benchRecall(facts, { calls: args.quick ? 100 : 200, dims, build, episodes });
    const e = r.withEpisodes as NonNullable<typeof r.withEpisodes>;
    const at = `${n(facts)} live facts (${r.dimensions} dims) + ${n(episodes)} episodes`;
    return {
      rows: [
        `| recall with query, without and with episodes alternately, ${at} | ${ms(e.withP50Ms, 1)} (without: ${ms(e.withoutP50Ms, 1)}) | | | episodes +${ms(e.withP50Ms - e.withoutP50Ms, 1)} ms; seeded in ${e.seedSeconds.toFixed(0)} s |`,
      ],
      result: r,
    };
  },
  // The same at a realistic provider latency: the embedding round trip dominates.
  "recall-provider": async (_u, args) => {
    const r = await benchRecall(1_000, { calls: args.quick ? 20 : 60, embeddingLatencyMs: 150 });
    return {
      rows: [
        `| recall, with query, 1,000 live facts, embeddings 150 ms | ${ms(r.withQuery.p50Ms, 1)} | ${ms(r.withQuery.p99Ms, 1)} | | ${r.statementsPerRecall} SQL statements, ${r.embeddingCallsPerQuery} embedding call |`,
      ],
      result: r,
    };
  },
  hnsw: ({ facts, dims }, args) =>
    withStore(args, async (store) => {
      const build = { m: args.m, efConstruction: args.efConstruction };
      const sweep = { efSearch: args.efSearch, iterative: args.iterative, calls: args.quick ? 50 : 100 };
      const r = await benchHnsw(facts, dims, build, sweep, neighboursFor(facts, args.neighbours), store);
      const at = `${n(facts)} facts (${dims} dims), m ${build.m}, ef_construction ${build.efConstruction}`;
      return {
        rows: r.settings.map(
          (s) =>
            `| recall with query, ${at}, ef_search ${s.efSearch} (searched with ${s.efSearched}), iterative ${s.iterative} | ${ms(s.withQuery.p50Ms, 1)} | ${ms(s.withQuery.p99Ms, 1)} | | vector recall@10 ${s.recallAt10.toFixed(3)} (against the stored vectors: ${s.recallAt10Stored.toFixed(3)}; ${s.distanceRatio.toFixed(4)}× the true 10's distance; searching 10: ${s.recallAt10Limit10.toFixed(3)}), ${s.candidatesPerQuery.toFixed(1)}/30 candidates, HNSW ${s.hnswIndexUsed ? "used" : "NOT used"}; index built in ${r.indexSeconds.toFixed(1)} s, ${Math.round(r.indexBytesPerFact)} B/fact |`,
        ),
        result: r,
      };
    }),
  load: ({ facts, dims }, args) =>
    withStore(args, async (store) => {
      const fake = await startBenchProvider();
      const plan = {
        facts,
        neighbours: neighboursFor(facts, args.neighbours),
        dims,
        build: { m: args.m, efConstruction: args.efConstruction },
      };
      const env = { OPENAI_API_KEY: "bench", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: String(dims) };
      try {
        const { bench, seed } = await openSeeded(plan, env, store);
        try {
          const row = await loadRow(bench, plan, seed, store);
          return { rows: [row.text], result: { ...plan, ...seed, ...row.sizes, memory: memoryNow(bench.database) } };
        } finally {
          await bench.close();
        }
      } finally {
        await fake.close();
      }
    }),
  // One small dataset among many, against itself alone (in memory, or on the server).
  tenants: async ({ facts, dims }, args) => {
    const r = await benchTenants(
      { facts, datasets: args.datasets, projects: args.projects, dims, messagesPerDataset: args.messagesPerDataset },
      args.quick ? 100 : 200,
    );
    const at = `${n(r.factsPerDataset)} facts among ${n(facts)} in ${n(r.datasets)} datasets of ${n(r.projects)} project${r.projects > 1 ? "s" : ""} (${dims} dims)`;
    const row = (what: string, d: typeof r.lone, extra = "") =>
      `| recall with query, ${what} | ${ms(d.p50Ms, 2)} | ${ms(d.p99Ms, 2)} | | vector recall@10 ${d.recallAt10.toFixed(3)}; the statement touched ${n(d.buffers)} buffers and ${n(d.factRowsRead)} fact rows${extra} |`;
    const withMessages = (what: string, d: typeof r.lone, extra = "") =>
      d.withMessages
        ? [
            `| recall with query and messages, ${what} | ${ms(d.withMessages.p50Ms, 2)} | ${ms(d.withMessages.p99Ms, 2)} | | the statement read ${n(d.withMessages.messageRowsRead)} rows of the messages' index tables${extra} |`,
          ]
        : [];
    const messagesAt = `${n(r.messagesPerDataset ?? 0)} messages a dataset`;
    return {
      rows: [
        row(`one dataset of ${n(r.factsPerDataset)} facts alone`, r.lone),
        row(
          at,
          r.amongMany,
          `; **${r.ratio.toFixed(2)}×** alone; loaded in ${r.loadSeconds.toFixed(1)} s + index ${r.indexSeconds.toFixed(1)} s`,
        ),
        ...withMessages(`${messagesAt}, the dataset alone`, r.lone),
        ...withMessages(
          `${messagesAt}, among the others`,
          r.amongMany,
          r.messagesRatio ? `; **${r.messagesRatio.toFixed(2)}×** alone` : "",
        ),
      ],
      result: r,
    };
  },
  // Always on disk: a server process opens a directory.
  "server-rss": ({ facts, dims }, args) =>
    withStore({ ...args, disk: true }, async (store) => {
      const plan = {
        facts,
        neighbours: neighboursFor(facts, args.neighbours),
        dims,
        build: { m: args.m, efConstruction: args.efConstruction },
      };
      const r = await benchServerRss(plan, store, {
        nodeFlags: args.nodeFlags,
        quick: args.quick,
        sharedBuffers: args.sharedBuffers,
      });
      return { rows: serverRssRows(r), result: r };
    }),
};

/** The load scenario's row: rows per second, the HNSW build, bytes on disk per fact. */
async function loadRow(bench: Bench, plan: SeedPlan, seed: SeedResult, store: SeedStore) {
  const [size] = rowsOf<{ bytes: string; index_bytes: string; facts: string }>(
    await bench.service.deps.db.execute(sql`
      SELECT pg_total_relation_size('facts') + pg_total_relation_size('fact_entities') AS bytes,
        pg_relation_size(${vectorIndexName("facts", plan.dims)}::regclass) AS index_bytes,
        (SELECT count(*) FROM facts) AS facts`),
  );
  const rows = plan.facts + plan.neighbours;
  const sizes = {
    bytesPerFact: Number(size.bytes) / Number(size.facts),
    indexBytesPerFact: Number(size.index_bytes) / Number(size.facts),
  };
  const where = bench.server ? ", on the PostgreSQL server" : store.dir ? ", on disk" : ", in memory";
  const reused = seed.reused ? " (times of the kept directory's load)" : "";
  const cpu =
    seed.loadCpuSeconds === undefined
      ? ""
      : ` (CPU${bench.server ? " of the bench process, not the server's" : ""}, the row-making worker thread's included: ${seed.loadCpuSeconds.toFixed(1)} s + ${seed.indexCpuSeconds?.toFixed(1)} s)`;
  const restored =
    seed.restoreSeconds === undefined
      ? ""
      : ` (of which ${seed.restoreSeconds.toFixed(1)} s making indexes and keys again)`;
  const text = `| bulk load (COPY), ${n(plan.facts)} facts + ${n(plan.neighbours)} neighbours (${plan.dims} dims, m ${plan.build.m}, ef_construction ${plan.build.efConstruction})${where} | | | ${Math.round(rows / seed.loadSeconds)} facts/s: ${seed.loadSeconds.toFixed(1)} s${restored} + HNSW build ${seed.indexSeconds.toFixed(1)} s${cpu}${reused} | ${Math.round(sizes.bytesPerFact)} bytes per fact, HNSW ${Math.round(sizes.indexBytesPerFact)} B per fact${bench.server ? "" : `, WASM ${seed.wasmMiBAfterBuild ?? "?"} MiB after the build`} |`;
  return { text, sizes };
}

function effort(args: BenchArgs) {
  return { runs: args.quick ? 3 : 5, ops: args.quick ? 1000 : 3000 };
}

export async function runUnit(unit: Unit, args: BenchArgs): Promise<UnitResult> {
  const full = { facts: unit.facts ?? 0, dims: unit.dims ?? 256, scenario: unit.scenario };
  return { unit, ...(await RUNNERS[unit.scenario](full, args)) };
}

/** What a unit's row in the memory table is called. */
export function unitLabel(unit: Unit): string {
  return unit.facts ? `${unit.scenario}, ${n(unit.facts)} facts, ${unit.dims} dims` : unit.scenario;
}

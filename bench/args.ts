/**
 * `npm run bench` switches: which scenarios, at which sizes and dimensions, and where the
 * machine-readable result goes. A pure parser so it can be tested; run.ts prints `usage()` on an
 * error or `--help`.
 */
import { DEFAULT_SETTINGS } from "../lib/settings/settings";

export const SCENARIOS = {
  "add-message": "add message in-process, 1, 8 and 32 clients",
  durability: "add message on disk, PGLITE_DURABILITY full and fast, in-process and over HTTP",
  "add-batch": "batch add over HTTP, batches of 100, on disk and in memory",
  prepare: "prepare (messageLimit 20) on a thread of 10,000 messages",
  episodes: "episode pipeline, threads ended at once, instant and realistic provider",
  semantic: "fact extraction against --facts live facts",
  recall:
    "recall without and with a query at --facts live facts, --dims dimensions, and beside the bare HNSW top-8 statement (their ratio)",
  "recall-messages":
    "recall with a query, without and with include messages, at --facts live facts and 200,000 messages (20,000 with --quick)",
  "recall-episodes":
    "recall with a query, without and with include episodes, at --facts live facts and 10,000 episodes in the dataset (2,000 with --quick)",
  "recall-provider": "recall with a query at 1,000 facts, embeddings 150 ms",
  hnsw: "HNSW recall@10 against exact search and recall p50 per --ef-search and --iterative at --facts",
  load: "bulk load of --facts facts (COPY), HNSW build time and size; no queries",
  tenants:
    "recall in one dataset of --facts / --datasets facts among --datasets datasets (--projects projects), against the same dataset alone; with --messages-per-dataset, recall with messages too",
  "server-rss":
    "the server process (npm start) on a directory of --facts facts: its RSS under recall and add-message load",
} as const;

export type Scenario = keyof typeof SCENARIOS;
export type IterativeScan = "off" | "relaxed_order" | "strict_order";

export interface BenchArgs {
  help: boolean;
  quick: boolean;
  facts: number[];
  dims: number[];
  only: Scenario[];
  out: string;
  /** hnsw scenario: the settings swept per query, and the index's build parameters. */
  efSearch: number[];
  iterative: IterativeScan[];
  m: number;
  efConstruction: number;
  /** Keep the embedded database on disk (a temporary directory) instead of in memory. */
  disk: boolean;
  /** Postgres shared_buffers for the embedded database (lib/db/pglite.ts's default unless given). */
  sharedBuffers?: string;
  /** The neighbour dataset's size as a share of --facts (1: as many neighbours as facts). */
  neighbours: number;
  /**
   * Keep the seeded database in this directory (implies --disk) and reuse it on the next run at
   * the same size, so a long load is paid once.
   */
  dataDir?: string;
  /** server-rss: the Node.js flags of the server process (default: those of `npm start`). */
  nodeFlags?: string[];
  /** recall: the project setting `semantic.vectorSecondSearch` (on by default, as in the service). */
  secondSearch: boolean;
  /** tenants: how many datasets share --facts, and how many projects they are spread over. */
  datasets: number;
  projects: number;
  /** tenants: conversation messages in every dataset too (0: none); recall is then timed with them as well. */
  messagesPerDataset: number;
  /** Every in-process service with Prometheus metrics on (METRICS_TOKEN set), to measure their cost. */
  metrics: boolean;
  /**
   * A PostgreSQL server (its maintenance database's URL, e.g. postgres://postgres@127.0.0.1:5432/postgres)
   * instead of the embedded database: each unit runs on a database of its own made there and
   * dropped after it (bench/server-database.ts). scripts/bench-postgres.sh starts a throwaway one.
   */
  databaseUrl?: string;
}

export const DEFAULT_OUT = "bench/results/latest.json";
/** Scenarios run without --only; hnsw, load, server-rss, tenants and recall-episodes are long or narrow and asked for by name. */
export const DEFAULT_SCENARIOS: Scenario[] = [
  "add-message",
  "durability",
  "add-batch",
  "prepare",
  "episodes",
  "semantic",
  "recall",
  "recall-provider",
];

/**
 * Scenarios that are about the embedded database itself (its durability modes, its directory on
 * disk, the server process over a directory): not run against a server.
 */
export const EMBEDDED_ONLY: Scenario[] = ["durability", "add-batch", "server-rss"];

export function usage(): string {
  const names = Object.entries(SCENARIOS)
    .map(([name, what]) => `  ${name.padEnd(16)} ${what}`)
    .join("\n");
  return `usage: npm run bench -- [--quick] [--facts 1e3,1e4,1e5,1e6] [--dims 256,1536] [--only recall,hnsw,...]
                       [--out ${DEFAULT_OUT}] [--disk] [--shared-buffers 32MB]
                       [--ef-search 40,100,200,400] [--iterative off,relaxed_order,strict_order]
                       [--m 16] [--ef-construction 64] [--neighbours 1] [--data-dir dir] [--second-search on|off] [--metrics on|off]
                       [--datasets 1000] [--projects 1] [--messages-per-dataset 100]
                       [--node-flags=--liftoff-only,--max-semi-space-size=1 | --node-flags=none]
                       [--database-url postgres://user@host:port/postgres]
--database-url: run on that PostgreSQL server (with pgvector) instead of the embedded database,
  through node-postgres as the service runs with DATABASE_URL: each scenario makes a database of
  its own there (memsvc_bench_*) and drops it after; the URL's own database must hold no tables
  (a maintenance database such as /postgres). Not with --disk, --data-dir, --shared-buffers (the
  server's own settings apply), nor with ${EMBEDDED_ONLY.join(", ")}. recall also measures cold (new
  connections; the cluster restarted with BENCH_PG_RESTART). scripts/bench-postgres.sh (npm run
  bench:pg) starts a throwaway server and passes it.
scenarios (default: all but hnsw, load, server-rss and tenants; with --database-url, also but
${EMBEDDED_ONLY.join(", ")}):
${names}`;
}

export class UsageError extends Error {}

/** A positive integer, in plain or 1e6 notation ("100000", "1e5", "1_000" is refused). */
export function parseCount(text: string, what: string): number {
  const n = /^\d+(\.\d+)?(e\d+)?$/i.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${what}: not a positive integer: ${text}`);
  return n;
}

const list = (text: string) => text.split(",").filter((s) => s !== "");

type Setter = (args: BenchArgs, value: string) => void;
const WITH_VALUE: Record<string, Setter> = {
  "--facts": (a, v) => {
    a.facts = list(v).map((s) => parseCount(s, "--facts"));
  },
  "--dims": (a, v) => {
    a.dims = list(v).map((s) => parseCount(s, "--dims"));
    const bad = a.dims.find((d) => d > 4000);
    if (bad) throw new UsageError(`--dims: at most 4000 (pgvector's halfvec index limit): ${bad}`);
  },
  "--only": (a, v) => {
    a.only = list(v).map((s) => {
      if (!(s in SCENARIOS)) throw new UsageError(`--only: unknown scenario ${s}`);
      return s as Scenario;
    });
  },
  "--out": (a, v) => {
    a.out = v;
  },
  "--ef-search": (a, v) => {
    a.efSearch = list(v).map((s) => parseCount(s, "--ef-search"));
  },
  "--iterative": (a, v) => {
    a.iterative = list(v).map((s) => {
      if (s !== "off" && s !== "relaxed_order" && s !== "strict_order") {
        throw new UsageError(`--iterative: off, relaxed_order or strict_order: ${s}`);
      }
      return s;
    });
  },
  "--shared-buffers": (a, v) => {
    if (!/^\d+(kB|MB|GB)$/.test(v)) throw new UsageError(`--shared-buffers: a size such as 32MB: ${v}`);
    a.sharedBuffers = v;
  },
  "--neighbours": (a, v) => {
    const share = /^(\d+(\.\d*)?|\.\d+)$/.test(v) ? Number(v) : Number.NaN;
    if (!(share >= 0 && share <= 1)) throw new UsageError(`--neighbours: a share of --facts from 0 to 1: ${v}`);
    a.neighbours = share;
  },
  "--data-dir": (a, v) => {
    a.dataDir = v;
    a.disk = true;
  },
  "--node-flags": (a, v) => {
    a.nodeFlags = v === "none" ? [] : list(v);
    const bad = a.nodeFlags.find((f) => !f.startsWith("--"));
    if (bad) throw new UsageError(`--node-flags: Node.js flags start with --: ${bad}`);
  },
  "--m": (a, v) => {
    a.m = parseCount(v, "--m");
  },
  "--ef-construction": (a, v) => {
    a.efConstruction = parseCount(v, "--ef-construction");
  },
  "--datasets": (a, v) => {
    a.datasets = parseCount(v, "--datasets");
  },
  "--projects": (a, v) => {
    a.projects = parseCount(v, "--projects");
  },
  "--messages-per-dataset": (a, v) => {
    a.messagesPerDataset = parseCount(v, "--messages-per-dataset");
  },
  "--second-search": (a, v) => {
    if (v !== "on" && v !== "off") throw new UsageError(`--second-search: on or off: ${v}`);
    a.secondSearch = v === "on";
  },
  "--database-url": (a, v) => {
    let url: URL;
    try {
      url = new URL(v);
    } catch {
      throw new UsageError(`--database-url: not a URL: ${v}`);
    }
    if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
      throw new UsageError(`--database-url: a postgres:// or postgresql:// URL: ${url.protocol}`);
    }
    if (url.pathname.length <= 1)
      throw new UsageError("--database-url: name the database to connect to (e.g. /postgres)");
    a.databaseUrl = v;
  },
  "--metrics": (a, v) => {
    if (v !== "on" && v !== "off") throw new UsageError(`--metrics: on or off: ${v}`);
    a.metrics = v === "on";
  },
};

/** Parses the switches after `npm run bench --`; `--name value` and `--name=value` both work. */
export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  const quick = argv.includes("--quick");
  const args: BenchArgs = {
    help: false,
    quick,
    facts: quick ? [1_000] : [1_000, 10_000],
    dims: [256],
    only: DEFAULT_SCENARIOS,
    out: DEFAULT_OUT,
    efSearch: [40, 100, 200, 400],
    iterative: ["relaxed_order"],
    // pgvector's defaults (the index ensureVectorIndexes builds).
    m: 16,
    efConstruction: 64,
    disk: false,
    neighbours: 1,
    secondSearch: DEFAULT_SETTINGS.semantic.vectorSecondSearch,
    datasets: 1_000,
    projects: 1,
    messagesPerDataset: 0,
    metrics: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].split(/=(.*)/s, 2);
    if (name === "--help" || name === "-h") args.help = true;
    else if (name === "--quick" || name === "--disk") args[name === "--quick" ? "quick" : "disk"] = true;
    else if (name in WITH_VALUE) {
      const value = inline ?? argv[++i];
      if (value === undefined || value === "") throw new UsageError(`${name} needs a value`);
      WITH_VALUE[name](args, value);
    } else throw new UsageError(`unknown switch: ${argv[i]}`);
    if (args.facts.length === 0 || args.dims.length === 0 || args.only.length === 0) {
      throw new UsageError(`${name} needs at least one value`);
    }
  }
  if (args.databaseUrl) serverChecks(args, argv);
  else if (args.sharedBuffers && !args.disk && Math.max(...args.facts) >= LARGE_POOL_LOAD_MAX) {
    // On disk the seed is loaded with the default pool and opened again with this one (openSeeded).
    throw new UsageError(
      `--shared-buffers with --facts of ${LARGE_POOL_LOAD_MAX.toLocaleString("en")} or more: also --disk or --data-dir (in memory the load would run with the large pool, tens of times slower)`,
    );
  }
  return args;
}

/** Facts from which an in-memory load beside a large --shared-buffers is refused (see parseBenchArgs). */
export const LARGE_POOL_LOAD_MAX = 500_000;

/** --database-url against the switches that are about the embedded database. */
function serverChecks(args: BenchArgs, argv: readonly string[]) {
  const given = (name: string) => argv.some((a) => a === name || a.startsWith(`${name}=`));
  const embedded = ["--disk", "--data-dir", "--shared-buffers"].filter(given);
  if (embedded.length) throw new UsageError(`--database-url: not with ${embedded.join(", ")} (embedded database only)`);
  if (!given("--only")) args.only = args.only.filter((s) => !EMBEDDED_ONLY.includes(s));
  const refused = args.only.filter((s) => EMBEDDED_ONLY.includes(s));
  if (refused.length) throw new UsageError(`--database-url: ${refused.join(", ")}: embedded database only`);
}

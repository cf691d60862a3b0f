import { sql } from "drizzle-orm";
import { authenticateApiKey } from "../lib/auth";
import { groupFacts, renderContext, touchedEntities } from "../lib/recall/context";
import { type Retrieval, recallSql, retrieve } from "../lib/recall/retrieve";
import { timeRangeOf } from "../lib/recall/time-range";
import { type PlanNode, planOf } from "../tests/helpers/plan";
import { bareTop8Sql } from "./bare";
import { benchEmbedding, startBenchProvider } from "./embedding";
import { median } from "./lib";
import { seedMessages } from "./messages-seed";
import { PGVECTOR_DEFAULT_BUILD } from "./recall";
import { openSeeded, recallQueries } from "./seed";

/**
 * `node --import tsx bench/profile-recall.ts [facts] [calls] [messages] [dims]`: where one recall with a query goes,
 * at `facts` live facts (default 10,000, and as many neighbours; `dims` dimensions, default 256), beside the bare HNSW
 * top-8 statement on the same data. Each part is timed on its own, interleaved per query (medians
 * of `calls`, default 100): the key's check, the query embedding (the bench provider, 0 ms), the
 * recall statement alone and with its row parsed (`retrieve`), the block's rendering, the whole
 * request through the app (uncached query, then the same query cached), and recall's statement in
 * its keyword (no vector) and no-query shapes. Then EXPLAIN ANALYZE of one statement: planning,
 * execution, and the costliest plan nodes. A tool for finding the time, not a benchmark: the
 * ratio is measured by `npm run bench -- --only recall` (bench/recall.ts). With `messages`, that
 * many conversation messages are seeded too (bench/messages-seed.ts) and every recall statement
 * includes them (`include: ["messages"]`); the whole requests too.
 */
const facts = Number(process.argv[2] ?? 10_000);
const calls = Number(process.argv[3] ?? 100);
const messages = Number(process.argv[4] ?? 0);
const dims = Number(process.argv[5] ?? 256);

const fake = await startBenchProvider();
const env = { OPENAI_API_KEY: "bench", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: String(dims) };
const { bench, seed } = await openSeeded({ facts, neighbours: facts, dims, build: PGVECTOR_DEFAULT_BUILD }, env);
try {
  const deps = bench.service.deps;
  const db = deps.db;
  const queries = recallQueries(calls, seed.entityCount);
  if (messages > 0) {
    const seeded = await seedMessages(db, {
      projectId: seed.projectId,
      count: messages,
      dims,
      build: PGVECTOR_DEFAULT_BUILD,
    });
    console.error(`profile: ${messages} messages seeded in ${seeded.seconds.toFixed(0)} s`);
  }
  const include = messages > 0 ? { include: ["messages"] } : {};
  const retrieval = (query: string, vector?: number[]): Retrieval => ({
    projectId: seed.projectId,
    dataset: "big",
    mode: vector ? "hybrid" : "keyword",
    query,
    vector,
    time: timeRangeOf(query, deps.clock.now()),
    facts: true,
    episodes: false,
    messages: messages > 0,
  });
  const parts: Record<string, number[]> = {};
  const timed = async <T>(name: string, work: () => Promise<T> | T): Promise<T> => {
    const started = performance.now();
    const result = await work();
    parts[name] = [...(parts[name] ?? []), performance.now() - started];
    return result;
  };
  for (let i = 0; i < 20; i++) await bench.call("POST", "/v1/memory/recall", { dataset: "big", query: `warm ${i}` });
  for (const [i, query] of queries.entries()) {
    const vector = benchEmbedding(query, dims);
    await timed("bare HNSW top-8 statement", () => db.execute(bareTop8Sql(seed.projectId, "big", vector, dims)));
    await timed("key check (its own statement)", () => authenticateApiKey(deps, `Bearer ${bench.key}`));
    await timed("query embedding (provider 0 ms)", () => deps.llm.embed([`${query} e`]));
    await timed("recall statement", () => db.execute(recallSql(deps, retrieval(query, vector))));
    const retrieved = await timed("recall statement + row parsed (retrieve)", () =>
      retrieve(deps, retrieval(query, vector)),
    );
    await timed("block rendered (group, entities, text)", () => {
      const f = retrieved.facts ?? [];
      return renderContext(groupFacts(f), touchedEntities(f));
    });
    await timed("recall statement, keyword shape (no vector)", () => db.execute(recallSql(deps, retrieval(query))));
    await timed("recall statement, no query", () =>
      db.execute(recallSql(deps, { ...retrieval(query), mode: "recent", query: undefined })),
    );
    await timed("whole recall, uncached query", () =>
      bench.call("POST", "/v1/memory/recall", { dataset: "big", query: `${query} w${i}`, ...include }),
    );
    await timed("whole recall, cached query", () =>
      bench.call("POST", "/v1/memory/recall", { dataset: "big", query: `${query} w${i}`, ...include }),
    );
  }
  const bare = median(parts["bare HNSW top-8 statement"] ?? []);
  const withMessages = messages > 0 ? `, ${messages.toLocaleString("en")} messages included` : "";
  console.log(
    `\n${facts.toLocaleString("en")} facts (+ as many neighbours)${withMessages}, ${dims} dims, medians of ${calls}:\n`,
  );
  console.log("| part | ms | × bare |\n| --- | --- | --- |");
  for (const [name, values] of Object.entries(parts)) {
    const m = median(values);
    console.log(`| ${name} | ${m.toFixed(3)} | ${(m / bare).toFixed(1)} |`);
  }

  // One statement analysed: the custom plan (EXPLAIN plans it with its values), node by node.
  const probe = queries[0] as string;
  const statement = recallSql(deps, retrieval(probe, benchEmbedding(probe, dims)));
  const plan = planOf(await db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`));
  console.log(`\nEXPLAIN ANALYZE: planning ${plan["Planning Time"]} ms, execution ${plan["Execution Time"]} ms`);
  console.log("\nPlan nodes by their own time (total time minus their children's, times loops):\n");
  console.log("| node | own ms | rows × loops |\n| --- | --- | --- |");
  const own = ownTimes(plan.Plan).sort((a, b) => b.ms - a.ms);
  for (const n of own.slice(0, 25)) console.log(`| ${n.label} | ${n.ms.toFixed(3)} | ${n.rows} |`);
} finally {
  await bench.close();
  await fake.close();
}

/** Each node's own time: its total (per loop, times loops) less its children's. */
function ownTimes(node: PlanNode, path = ""): { label: string; ms: number; rows: string }[] {
  const total = (n: PlanNode) => (n["Actual Total Time"] ?? 0) * (n["Actual Loops"] ?? 0);
  const children = node.Plans ?? [];
  const label = [
    node["Node Type"],
    node["Relation Name"] ? `on ${node["Relation Name"]}` : "",
    node["Index Name"] ? `using ${node["Index Name"]}` : "",
    node["Subplan Name"] ? `(${node["Subplan Name"]})` : "",
  ]
    .filter(Boolean)
    .join(" ");
  const here = `${path}${path ? " > " : ""}${label}`;
  const ms = total(node) - children.reduce((sum, c) => sum + total(c), 0);
  return [
    {
      label: here.length > 160 ? `…${here.slice(-160)}` : here,
      ms,
      rows: `${node["Actual Rows"]} × ${node["Actual Loops"]}`,
    },
    ...children.flatMap((c) => ownTimes(c, label)),
  ];
}

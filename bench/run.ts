import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { benchAddBatch } from "./add-batch";
import { benchAddMessage } from "./add-message";
import { benchDurability } from "./durability";
import { benchEpisodes } from "./episodes";
import { benchPrepare } from "./prepare";
import { benchRecall } from "./recall";
import { benchSemantic } from "./semantic";

/**
 * `npm run bench [-- --quick] [-- --big]`: service-time benchmarks of the Node.js host in-process on the
 * embedded database. Prints a markdown table and writes bench/results/latest.json.
 * Figures are medians of several runs; nothing here asserts a timing.
 */
const quick = process.argv.includes("--quick");
const big = process.argv.includes("--big");
const runs = quick ? 3 : 5;
const ops = quick ? 1000 : 3000;

const machine = `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const rows: string[] = [];
const results: Record<string, unknown> = { machine, date: new Date().toISOString(), quick, runs };

const addMessage = [];
for (const clients of [1, 8, 32]) {
  const r = await benchAddMessage(clients, ops, runs);
  addMessage.push(r);
  rows.push(
    `| add message, ${clients} client${clients > 1 ? "s" : ""} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${Math.round(r.messagesPerSecond)} msg/s | ${r.statementsPerRequest.toFixed(1)} SQL statements |`,
  );
}
results.addMessage = addMessage;

// On disk, durable (the default) against fsync off: the cost of an acknowledged write on disk.
const durability = [];
for (const transport of ["in-process", "http"] as const) {
  for (const clients of [1, 8]) {
    for (const mode of ["full", "fast"] as const) {
      const r = await benchDurability(mode, transport, clients, quick ? 300 : 1000, runs);
      durability.push(r);
      rows.push(
        `| add message on disk, PGLITE_DURABILITY=${mode}, ${transport}, ${clients} client${clients > 1 ? "s" : ""} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${Math.round(r.messagesPerSecond)} msg/s | ${r.fsyncsPerWrite.toFixed(2)} fsync/write |`,
      );
    }
  }
}
results.durability = durability;

// Batch add over HTTP: batches of 100 from one client, durable on disk (the default) and in memory.
const addBatch = [];
for (const storage of ["disk", "memory"] as const) {
  const r = await benchAddBatch(storage, 100, 1, quick ? 20 : 50, runs);
  addBatch.push(r);
  rows.push(
    `| add messages in batches of 100 (messages:batch), http, 1 client, ${storage === "disk" ? "on disk, PGLITE_DURABILITY=full" : "in memory"} | ${r.p50Ms.toFixed(2)} per batch | ${r.p99Ms.toFixed(2)} per batch | ${Math.round(r.messagesPerSecond)} msg/s | ${r.statementsPerRequest.toFixed(1)} SQL statements per batch |`,
  );
}
results.addBatch = addBatch;

const prepare = [];
for (const compacted of [false, true]) {
  const r = await benchPrepare(10_000, compacted, quick ? 100 : 300);
  prepare.push(r);
  rows.push(
    `| prepare (messageLimit 20), thread of 10,000 messages${compacted ? ", all but 6 compacted" : ""} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | | ${r.statementsPerPrepare.toFixed(1)} SQL statements (auth + prepare) |`,
  );
}
results.prepare = prepare;

const episodes = [];
for (const [threads, latency] of [
  [quick ? 60 : 200, { chat: 0, embeddings: 0 }],
  [quick ? 20 : 50, { chat: 800, embeddings: 150 }],
] as const) {
  const runsOf = [];
  for (let r = 0; r < (quick ? 1 : 3); r++) runsOf.push(await benchEpisodes(threads, latency));
  const r = runsOf.sort((a, b) => a.seconds - b.seconds)[Math.floor(runsOf.length / 2)];
  episodes.push(r);
  const provider = latency.chat ? `chat ${latency.chat} ms, embeddings ${latency.embeddings} ms` : "provider 0 ms";
  rows.push(
    `| episode pipeline, ${threads} threads ended at once, ${provider} | | | ${r.episodesPerSecond.toFixed(1)} episodes/s, all done in ${r.seconds.toFixed(2)} s | ${r.chatCallsPerEpisode.toFixed(2)} model calls (summary, extraction) + ${r.embeddingBatchesPerEpisode.toFixed(2)} embedding batch/episode |`,
  );
}
results.episodes = episodes;

const semantic = [];
// 100k live facts takes minutes to seed on the embedded database: opt in with --big.
for (const live of big ? [1_000, 10_000, 100_000] : quick ? [1_000] : [1_000, 10_000]) {
  const r = await benchSemantic(live);
  semantic.push(r);
  rows.push(
    `| fact extraction, 30 new facts vs ${live.toLocaleString("en")} live facts (${r.dimensions} dims), provider 0 ms | ${r.extractionMs.toFixed(0)} | | | ${r.modelCalls} model + ${r.embeddingBatches} embedding call(s) |`,
  );
}
results.semantic = semantic;

const recall = [];
// Seeding 100k facts (two datasets) and building the HNSW index takes about 10 minutes: --big.
for (const live of big ? [1_000, 10_000, 100_000] : quick ? [1_000] : [1_000, 10_000]) {
  const r = await benchRecall(live, { calls: quick ? 100 : 200 });
  recall.push(r);
  const at = `${live.toLocaleString("en")} live facts (${r.dimensions} dims)`;
  const cost = `${r.statementsPerRecall} SQL statements (auth + recall)`;
  rows.push(`| recall, no query, ${at} | ${r.noQuery.p50Ms.toFixed(1)} | ${r.noQuery.p99Ms.toFixed(1)} | | ${cost} |`);
  rows.push(
    `| recall, with query, ${at}, provider 0 ms | ${r.withQuery.p50Ms.toFixed(1)} | ${r.withQuery.p99Ms.toFixed(1)} | | ${cost}, ${r.embeddingCallsPerQuery} embedding call; vector recall@10 ${r.recallAt10.toFixed(3)} (HNSW ${r.hnswIndexUsed ? "used" : "NOT used"}); ${Math.round(r.bytesPerFact)} bytes on disk per fact |`,
  );
  rows.push(
    `| recall, with query + raw + episodes, ${at} | ${r.withQueryAndEpisodes.p50Ms.toFixed(1)} | ${r.withQueryAndEpisodes.p99Ms.toFixed(1)} | | ${cost} |`,
  );
}
{
  // The same at a realistic provider latency: the embedding round trip dominates.
  const r = await benchRecall(1_000, { calls: quick ? 20 : 60, embeddingLatencyMs: 150 });
  recall.push(r);
  rows.push(
    `| recall, with query, 1,000 live facts, embeddings 150 ms | ${r.withQuery.p50Ms.toFixed(1)} | ${r.withQuery.p99Ms.toFixed(1)} | | ${r.statementsPerRecall} SQL statements, ${r.embeddingCallsPerQuery} embedding call |`,
  );
}
results.recall = recall;
results.peakRssMiB = Math.round(process.resourceUsage().maxRSS / 1024);

console.log(`\nMachine: ${machine}; median of ${runs} runs of ${ops} operations\n`);
console.log("| operation | p50 ms | p99 ms | throughput | cost per operation |");
console.log("| --- | --- | --- | --- | --- |");
for (const row of rows) console.log(row);
console.log(`\nPeak RSS: ${results.peakRssMiB} MiB`);

mkdirSync(new URL("./results/", import.meta.url), { recursive: true });
writeFileSync(new URL("./results/latest.json", import.meta.url), `${JSON.stringify(results, null, 2)}\n`);

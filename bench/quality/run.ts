/**
 * The retrieval-quality benchmark: `npm run bench:quality [-- --quick] [--seed N] [--sweep [--sweep-questions N]]
 * [--extraction-keeps 0.83]`.
 * Prints markdown tables and writes bench/results/quality-latest.json.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, platform, release, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { FULL, QUESTION_KINDS, QUICK } from "./fixture";
import { runQuality } from "./quality";
import { longListTable, markdown, qualityTable } from "./report";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    seed: { type: "string", default: "42" },
    sweep: { type: "boolean", default: false },
    "sweep-questions": { type: "string", default: "200" },
    // The share of gold facts extraction stores: 1 (all) by default; 0.83 is what real extraction
    // stored of the evidence on real dialogues, where conversation evidence has something to add.
    "extraction-keeps": { type: "string", default: "1" },
    out: { type: "string", default: "bench/results/quality-latest.json" },
  },
});
const seed = Number(values.seed);
if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, not ${values.seed}`);
const extractionKeeps = Number(values["extraction-keeps"]);
if (!(extractionKeeps > 0 && extractionKeeps <= 1)) {
  throw new Error(`--extraction-keeps must be in (0, 1], not ${values["extraction-keeps"]}`);
}

const log = (line: string) => console.error(`[bench:quality] ${line}`);
const result = await runQuality({
  seed,
  size: values.quick ? QUICK : FULL,
  log,
  sweep: values.sweep ? Number(values["sweep-questions"]) : undefined,
  extractionKeeps,
});

const kinds = [...QUESTION_KINDS];
const systems = [
  { name: "recall (service)", ...result.recall },
  { name: "dense only (cosine)", ...result.baselines.dense },
  { name: "BM25 only", ...result.baselines.bm25 },
  { name: "RRF(dense, BM25)", ...result.baselines.rrf },
  { name: "ceiling (gold live)", ...result.ceiling.live },
];
const s = result.sizes;
const keepsNote = extractionKeeps < 1 ? `, extraction keeps ${extractionKeeps}` : "";
console.log(`## Retrieval quality (seed ${seed}${values.quick ? ", quick" : ""}${keepsNote})\n`);
console.log(
  `${s.users} users, ${s.sessions} sessions, ${s.messages} messages; ${s.goldFacts} gold facts, ${s.goldStored} stored ` +
    `(${s.liveFacts} live, ${s.strayStored} stray), ${s.supersessionsApplied}/${s.supersessions} supersessions applied; ` +
    `${s.questions} questions. Ceiling: ${(result.ceiling.live.all.hit30 * 100).toFixed(1)}% live, ` +
    `${(result.ceiling.stored.all.hit30 * 100).toFixed(1)}% stored at all.\n`,
);
const episodes = result.episodes.map((e) => `${e.episodes} ${e.status}/${e.semanticStatus}`).join(", ");
console.log(`Episodes (summary/extraction): ${episodes}.\n`);
console.log(qualityTable(systems, kinds));
console.log();
console.log(longListTable(systems, kinds));
console.log(
  `\nBlock: ${result.recall.tokens.median} tokens median, ${result.recall.tokens.max} max (o200k). ` +
    `Recall latency (query vector cached): p50 ${result.recall.latencyMs.p50.toFixed(1)} ms, ` +
    `p99 ${result.recall.latencyMs.p99.toFixed(1)} ms. Write ${result.seconds.write.toFixed(0)} s, ` +
    `evaluate ${result.seconds.evaluate.toFixed(0)} s.`,
);
console.log('\n### Evidence in the block (facts and conversation messages, `include: ["messages"]`)\n');
console.log(
  markdown(
    [
      "messages",
      "evidence in the block",
      "stored ceiling (facts)",
      "facts alone (hit@8)",
      "tokens mean",
      "median",
      "max",
    ],
    result.recall.evidence.map((e) => [
      String(e.messages),
      (e.inBlock * 100).toFixed(1),
      (result.ceiling.stored.all.hit30 * 100).toFixed(1),
      (result.recall.all.hit8 * 100).toFixed(1),
      e.tokens.mean.toFixed(0),
      String(e.tokens.median),
      String(e.tokens.max),
    ]),
  ),
);
if (result.sweep) {
  const pct = (x: number) => (x * 100).toFixed(1);
  console.log(`\n### Weight sweep (${result.sweep[0]?.questions ?? 0} questions, 30-fact recall; hit@8 = rank <= 8)\n`);
  console.log(
    markdown(
      ["vector", "keyword", "entity", "time", "hit@1", "hit@8", "hit@30", "MRR"],
      result.sweep.map((r) => [
        String(r.vectorWeight),
        String(r.keywordWeight),
        String(r.entityWeight),
        String(r.timeWeight),
        pct(r.hit1),
        pct(r.hit8),
        pct(r.hit30),
        r.mrr.toFixed(3),
      ]),
    ),
  );
}

const machine = {
  cpu: cpus()[0]?.model,
  cores: cpus().length,
  memoryGb: Math.round(totalmem() / 2 ** 30),
  platform: `${platform()} ${release()}`,
  node: process.version,
};
/** The service code measured (the working tree may differ from it). */
const commit = (() => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
  } catch {
    return null;
  }
})();
mkdirSync("bench/results", { recursive: true });
writeFileSync(
  values.out as string,
  `${JSON.stringify({ machine, date: new Date().toISOString(), commit, quick: values.quick, ...result }, null, 2)}\n`,
);
log(`wrote ${values.out}`);

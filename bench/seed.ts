import { sql } from "drizzle-orm";
import { pgliteClientOf } from "../lib/db/pglite";
import { rowsOf } from "../lib/db/rows";
import { EMBEDDED_TABLES, type HnswBuild, vectorIndexName, vectorIndexSql } from "../lib/db/vector-indexes";
import { benchEmbedding } from "./embedding";
import type { Bench } from "./lib";

export const ADJECTIVES = [
  "green",
  "spicy",
  "quiet",
  "vintage",
  "electric",
  "tiny",
  "nordic",
  "urban",
  "wild",
  "golden",
];
export const NOUNS = [
  "tea",
  "jazz",
  "bicycle",
  "garden",
  "novel",
  "camera",
  "guitar",
  "kayak",
  "chess",
  "bakery",
  "opera",
  "hiking",
];
const PREDICATES = ["likes", "owns", "visited", "plans", "studies", "avoids", "collects", "recommends"];

/** The i-th seeded fact: a few words from small vocabularies plus a unique token. */
export const factWords = (i: number) => {
  const a = ADJECTIVES[i % ADJECTIVES.length];
  const n = NOUNS[Math.floor(i / ADJECTIVES.length) % NOUNS.length];
  const p = PREDICATES[Math.floor(i / 7) % PREDICATES.length];
  return { predicate: p, object: `${a} ${n} number ${i}` };
};

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

export interface SeedResult {
  projectId: string;
  entityCount: number;
  loadSeconds: number;
  indexSeconds: number;
}

/**
 * Loads `liveFacts` facts into dataset "big" and as many into "neighbour" (same project and
 * table, so every search is filtered), with their entities, fact_entities and 50 episodes each,
 * by COPY through PGlite (the fastest bulk path it has: no JSON, no per-row statement), with the
 * HNSW indexes dropped during the load and built after it with `build`.
 */
export async function seedFacts(bench: Bench, liveFacts: number, dims: number, build: HnswBuild): Promise<SeedResult> {
  const db = bench.service.deps.db;
  const client = pgliteClientOf(bench.database);
  const thread = await bench.call("POST", "/v1/threads", { dataset: "big" });
  const [{ project_id: projectId }] = rowsOf<{ project_id: string }>(
    await db.execute(sql`SELECT project_id FROM threads WHERE id = ${thread.threadId as string}`),
  );
  const started = performance.now();
  for (const table of EMBEDDED_TABLES)
    await db.execute(sql.raw(`DROP INDEX IF EXISTS ${vectorIndexName(table, dims)}`));
  const entityCount = entityCountFor(liveFacts);
  const copy = (table: string, columns: string, lines: string[]) =>
    client.query(`COPY ${table} (${columns}) FROM '/dev/blob' WITH (FORMAT csv)`, [], {
      blob: new Blob([lines.join("\n")]),
    });
  for (const dataset of ["big", "neighbour"]) {
    const entities = Array.from({ length: entityCount }, (_, e) => {
      const name = `${NOUNS[e % NOUNS.length]} club ${e}`;
      return [`ent_${dataset}_${e}`, projectId, dataset, name, "ORG", csv(vectorText(benchEmbedding(name, dims)))].join(
        ",",
      );
    });
    await copy("entities", "id, project_id, dataset, name, type, embedding", entities);
    for (let done = 0; done < liveFacts; done += CHUNK) {
      const facts: string[] = [];
      const links: string[] = [];
      for (let i = done; i < Math.min(done + CHUNK, liveFacts); i++) {
        const f = factWords(i);
        const id = `fct_${dataset}_${i}`;
        const v = vectorText(benchEmbedding(`user ${f.predicate} ${f.object}`, dims));
        const t = new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString();
        facts.push(`${id},${projectId},${dataset},user,${f.predicate},${f.object},0.9,I said so,${t},${csv(v)}`);
        links.push(`${id},ent_${dataset}_${i % entityCount}`);
      }
      await copy(
        "facts",
        "id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding",
        facts,
      );
      await copy("fact_entities", "fact_id, entity_id", links);
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
  const loadSeconds = (performance.now() - started) / 1000;
  const indexed = performance.now();
  await buildVectorIndexes(bench, dims, build);
  await db.execute(sql`ANALYZE`);
  return { projectId, entityCount, loadSeconds, indexSeconds: (performance.now() - indexed) / 1000 };
}

/**
 * The HNSW indexes lib/db/vector-indexes.ts defines (same names, expression and predicate, so
 * recall's plans use them), with the given build parameters. The graph is built in memory when it
 * fits maintenance_work_mem (much faster); the setting is put back afterwards, though the WASM
 * memory it grew stays with the process.
 */
export async function buildVectorIndexes(bench: Bench, dims: number, build: HnswBuild) {
  const db = bench.service.deps.db;
  await db.execute(sql`SET maintenance_work_mem = '1GB'`);
  for (const table of EMBEDDED_TABLES) {
    await db.execute(sql.raw(`DROP INDEX IF EXISTS ${vectorIndexName(table, dims)}`));
    await db.execute(sql.raw(vectorIndexSql(table, dims, build)));
  }
  await db.execute(sql`RESET maintenance_work_mem`);
}

import { sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { ensureVectorIndexes } from "../lib/db/vector-indexes";
import { recallSql } from "../lib/recall/retrieve";
import { fakeEmbedding, startFakeOpenAI } from "../tests/helpers/fake-openai";
import { benchService, percentile } from "./lib";

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

export interface RecallBenchResult {
  liveFacts: number;
  dimensions: number;
  embeddingLatencyMs: number;
  noQuery: { p50Ms: number; p99Ms: number };
  withQuery: { p50Ms: number; p99Ms: number };
  withQueryAndEpisodes: { p50Ms: number; p99Ms: number };
  statementsPerRecall: number;
  embeddingCallsPerQuery: number;
  hnswIndexUsed: boolean;
  recallAt10: number;
  /** The same, against an exact scan in the index's own half precision: the graph's share of the loss. */
  recallAt10SamePrecision: number;
  efSearch: number;
  /** facts + fact_entities, tables and indexes (HNSW and full-text included), per stored fact. */
  bytesPerFact: number;
  seedSeconds: number;
}

const ADJECTIVES = ["green", "spicy", "quiet", "vintage", "electric", "tiny", "nordic", "urban", "wild", "golden"];
const NOUNS = [
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
const factWords = (i: number) => {
  const a = ADJECTIVES[i % ADJECTIVES.length];
  const n = NOUNS[Math.floor(i / ADJECTIVES.length) % NOUNS.length];
  const p = PREDICATES[Math.floor(i / 7) % PREDICATES.length];
  return { predicate: p, object: `${a} ${n} number ${i}` };
};

/**
 * Recall service time at `liveFacts` live facts in one dataset (plus an equal-sized neighbour
 * dataset in the same table, so every search is filtered), with an instant provider: p50/p99 of
 * recall without a query, with a query (every query distinct, so the embedding cache never
 * answers), and with a query plus raw and episodes; bytes on disk per fact; statements per recall; and the vector signal's
 * recall@10 on the HNSW index against an exact scan.
 */
export interface RecallBenchOptions {
  calls?: number;
  dims?: number;
  /** Provider latency for the query embedding (0: service time only). */
  embeddingLatencyMs?: number;
  efSearch?: number;
  inspect?: (bench: Awaited<ReturnType<typeof benchService>>, projectId: string) => Promise<void>;
}

export async function benchRecall(liveFacts: number, options: RecallBenchOptions = {}): Promise<RecallBenchResult> {
  const { calls = 200, dims = 256, embeddingLatencyMs = 0, efSearch, inspect } = options;
  const fake = await startFakeOpenAI();
  const bench = await benchService({
    OPENAI_API_KEY: "bench",
    OPENAI_BASE_URL: fake.url,
    EMBEDDING_DIMENSIONS: String(dims),
  });
  try {
    const db = bench.service.deps.db;
    const thread = await bench.call("POST", "/v1/threads", { dataset: "big" });
    const [{ project_id: projectId }] = rowsOf<{ project_id: string }>(
      await db.execute(sql`SELECT project_id FROM threads WHERE id = ${thread.threadId as string}`),
    );

    const seeded = performance.now();
    for (const table of ["facts", "entities", "episodes"]) {
      await db.execute(sql.raw(`DROP INDEX IF EXISTS ${table}_embedding_hnsw_${dims}`));
    }
    const entityCount = Math.max(10, Math.floor(liveFacts / 50));
    for (const dataset of ["big", "neighbour"]) {
      const entityRows = Array.from({ length: entityCount }, (_, e) => ({
        id: `ent_${dataset}_${e}`,
        name: `${NOUNS[e % NOUNS.length]} club ${e}`,
        v: `[${fakeEmbedding(`${NOUNS[e % NOUNS.length]} club ${e}`, dims)}]`,
      }));
      await db.execute(sql`
        INSERT INTO entities (id, project_id, dataset, name, type, embedding)
        SELECT r ->> 'id', ${projectId}, ${dataset}, r ->> 'name', 'ORG', (r ->> 'v')::vector
        FROM jsonb_array_elements(${JSON.stringify(entityRows)}::jsonb) r`);
      for (let done = 0; done < liveFacts; done += 2000) {
        const rows = Array.from({ length: Math.min(2000, liveFacts - done) }, (_, k) => {
          const i = done + k;
          const f = factWords(i);
          return {
            id: `fct_${dataset}_${i}`,
            p: f.predicate,
            o: f.object,
            v: `[${fakeEmbedding(`user ${f.predicate} ${f.object}`, dims)}]`,
            e: `ent_${dataset}_${i % entityCount}`,
            t: new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString(),
          };
        });
        const json = JSON.stringify(rows);
        await db.execute(sql`
          INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
          SELECT r ->> 'id', ${projectId}, ${dataset}, 'user', r ->> 'p', r ->> 'o', 0.9, 'I said so', (r ->> 't')::timestamptz,
            (r ->> 'v')::vector
          FROM jsonb_array_elements(${json}::jsonb) r`);
        await db.execute(sql`
          INSERT INTO fact_entities (fact_id, entity_id)
          SELECT r ->> 'id', r ->> 'e' FROM jsonb_array_elements(${json}::jsonb) r`);
      }
      const episodes = Array.from({ length: 50 }, (_, k) => ({
        id: `epi_${dataset}_${k}`,
        s: `The user talked about ${NOUNS[k % NOUNS.length]} and ${ADJECTIVES[k % ADJECTIVES.length]} things`,
        t: new Date(Date.UTC(2025, 0, 1) + k * 86_400_000).toISOString(),
      }));
      await db.execute(sql`
        INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, summary, message_count,
                              from_seq, to_seq, started_at, ended_at, embedding)
        SELECT r ->> 'id', ${projectId}, 'thr_bench', ${dataset}, 'completed', 'completed', r ->> 's', 2, 1, 2,
          (r ->> 't')::timestamptz, (r ->> 't')::timestamptz, (r ->> 'v')::vector
        FROM jsonb_array_elements(${JSON.stringify(episodes.map((e) => ({ ...e, v: `[${fakeEmbedding(e.s, dims)}]` })))}::jsonb) r`);
    }
    // Built once over the seeded rows (much faster than growing the graph row by row).
    await db.execute(sql`SET maintenance_work_mem = '1GB'`);
    await ensureVectorIndexes(db, dims);
    await db.execute(sql`ANALYZE`);
    const seedSeconds = (performance.now() - seeded) / 1000;
    const [size] = rowsOf<{ bytes: number | string; facts: number | string }>(
      await db.execute(sql`
        SELECT pg_total_relation_size('facts') + pg_total_relation_size('fact_entities') AS bytes,
          (SELECT count(*) FROM facts) AS facts`),
    );
    const bytesPerFact = Number(size.bytes) / Number(size.facts);

    const queries = Array.from(
      { length: calls },
      (_, i) =>
        `what about ${ADJECTIVES[(i * 3) % ADJECTIVES.length]} ${NOUNS[(i * 5) % NOUNS.length]} and the ${NOUNS[(i * 7) % NOUNS.length]} club ${i % entityCount}, question ${i}`,
    );
    const time = async (body: (i: number) => Record<string, unknown>) => {
      const latencies: number[] = [];
      for (let i = 0; i < calls; i++) {
        const started = performance.now();
        await bench.call("POST", "/v1/memory/recall", body(i));
        latencies.push(performance.now() - started);
      }
      latencies.sort((a, b) => a - b);
      return { p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
    };

    if (efSearch !== undefined) await db.execute(sql.raw(`SET hnsw.ef_search = ${efSearch}`));
    const [{ ef_search: efInForce }] = rowsOf<{ ef_search: string }>(
      await db.execute(sql`SELECT current_setting('hnsw.ef_search') AS ef_search`),
    );
    if (inspect) await inspect(bench, projectId);
    fake.endpointLatencyMs.embeddings = embeddingLatencyMs;
    // Warm-up (plans, caches), then the measured runs.
    for (let i = 0; i < 10; i++) await bench.call("POST", "/v1/memory/recall", { dataset: "big", query: `warm ${i}` });
    const noQuery = await time(() => ({ dataset: "big" }));
    const embeddingsBefore = fake.embeddingCalls().length;
    const statementsBefore = bench.statements();
    const withQuery = await time((i) => ({ dataset: "big", query: queries[i] }));
    const statementsPerRecall = (bench.statements() - statementsBefore) / calls;
    const embeddingCallsPerQuery = (fake.embeddingCalls().length - embeddingsBefore) / calls;
    const withQueryAndEpisodes = await time((i) => ({
      dataset: "big",
      query: `${queries[i]} again`,
      include: ["episodes"],
    }));

    // Is the vector signal served by the HNSW index?
    const probe = fakeEmbedding(queries[0], dims);
    const plan = rowsOf<Record<string, string>>(
      await db.execute(
        sql`EXPLAIN ${recallSql(bench.service.deps, {
          projectId,
          dataset: "big",
          mode: "hybrid",
          query: queries[0],
          vector: probe,
          facts: true,
          episodes: false,
        })}`,
      ),
    )
      .map((r) => Object.values(r)[0])
      .join("\n");
    const hnswIndexUsed = plan.includes(`facts_embedding_hnsw_${dims}`);

    // recall@10 of the index path (as recall's vector signal runs it) against an exact scan. Ties
    // count: a returned row as near as the exact 10th is a hit (seeded facts differ by one word,
    // so many are equally near and which of them an exact scan lists first is arbitrary).
    const recalls: number[] = [];
    const recallsSamePrecision: number[] = [];
    const TIE = 1e-6;
    for (const query of queries.slice(0, 50)) {
      const v = `[${fakeEmbedding(query, dims)}]`;
      const D = sql.raw(String(dims));
      const approximate = rowsOf<{ full: number; half: number }>(
        await db.execute(sql`
          SELECT f.embedding <=> ${v}::vector AS full,
            (f.embedding::halfvec(${D}) <=> ${v}::halfvec(${D})) AS half FROM facts f
          WHERE f.project_id = ${projectId} AND f.dataset = 'big' AND f.invalid_at IS NULL AND f.confidence >= 0.5
            AND vector_dims(f.embedding) = ${D}
          ORDER BY f.embedding::halfvec(${D}) <=> ${v}::halfvec(${D}) LIMIT 10`),
      );
      const [exact] = rowsOf<{ tenth: number }>(
        await db.execute(sql`
          SELECT max(d) AS tenth FROM (SELECT f.embedding <=> ${v}::vector AS d FROM facts f
          WHERE f.project_id = ${projectId} AND f.dataset = 'big' AND f.invalid_at IS NULL AND f.confidence >= 0.5
          ORDER BY 1 LIMIT 10) e`),
      );
      // "+ 0" keeps the planner off the index: an exact scan at the index's half precision.
      const [exactHalf] = rowsOf<{ tenth: number }>(
        await db.execute(sql`
          SELECT max(d) AS tenth FROM (SELECT (f.embedding::halfvec(${D}) <=> ${v}::halfvec(${D})) + 0 AS d FROM facts f
          WHERE f.project_id = ${projectId} AND f.dataset = 'big' AND f.invalid_at IS NULL AND f.confidence >= 0.5
            AND vector_dims(f.embedding) = ${D}
          ORDER BY 1 LIMIT 10) e`),
      );
      recalls.push(approximate.filter((r) => Number(r.full) <= Number(exact.tenth) + TIE).length / 10);
      recallsSamePrecision.push(approximate.filter((r) => Number(r.half) <= Number(exactHalf.tenth) + TIE).length / 10);
    }

    return {
      liveFacts,
      dimensions: dims,
      embeddingLatencyMs,
      noQuery,
      withQuery,
      withQueryAndEpisodes,
      statementsPerRecall,
      embeddingCallsPerQuery,
      hnswIndexUsed,
      recallAt10: mean(recalls),
      recallAt10SamePrecision: mean(recallsSamePrecision),
      efSearch: Number(efInForce),
      bytesPerFact,
      seedSeconds,
    };
  } finally {
    await bench.close();
    await fake.close();
  }
}

import { sql } from "drizzle-orm";
import { ensureVectorIndexes } from "../lib/db/vector-indexes";
import { runDueJobs } from "../lib/jobs/runner";
import { processSemantic } from "../lib/pipeline/run";
import { startFakeOpenAI } from "../tests/helpers/fake-openai";
import { benchService } from "./lib";

export interface SemanticBenchResult {
  liveFacts: number;
  newFacts: number;
  dimensions: number;
  extractionMs: number;
  statements: number;
  modelCalls: number;
  embeddingBatches: number;
}

/**
 * One episode's fact extraction (30 new facts, each with contradiction candidates) against a
 * dataset already holding `liveFacts` live facts, with an instant provider: the time is the
 * candidate search and the write phase on the embedded database.
 */
export async function benchSemantic(
  liveFacts: number,
  newFacts = 30,
  dims = 256,
  efSearch?: number,
): Promise<SemanticBenchResult> {
  const fake = await startFakeOpenAI();
  const bench = await benchService({
    OPENAI_API_KEY: "bench",
    OPENAI_BASE_URL: fake.url,
    EMBEDDING_DIMENSIONS: String(dims),
  });
  const userLines = Array.from({ length: newFacts }, (_, i) => `I have hobby number ${i} which is climbing route ${i}`);
  fake.onStructured("episode_summary", () => ({ summary: "The user listed hobbies.", keyLearnings: [] }));
  fake.onStructured("fact_extraction", () => ({
    facts: userLines.map((line, i) => ({
      subject: "user",
      predicate: "has_hobby",
      object: `climbing route ${i}`,
      objectIsEntity: false,
      confidence: 0.9,
      sourceQuote: line,
      validAt: null,
    })),
    entities: [{ name: "Climbing", type: "CONCEPT" }],
  }));
  fake.onStructured("contradiction_judgement", (req) => ({
    judgements: [...(req.messages.at(-1)?.content.matchAll(/Pair (\d+)/g) ?? [])].map((m) => ({
      pair: Number(m[1]),
      contradicts: false,
    })),
  }));
  try {
    const db = bench.service.deps.db;
    const thread = await bench.call("POST", "/v1/threads", { dataset: "big" });
    const [{ project_id: projectId }] = (
      (await db.execute(sql`SELECT project_id FROM threads WHERE id = ${thread.threadId as string}`)) as unknown as {
        rows: { project_id: string }[];
      }
    ).rows;
    // The dataset's existing live facts, with random vectors, in batches of 10k; the HNSW index
    // is built once afterwards (much faster than growing it row by row).
    await db.execute(sql.raw(`DROP INDEX IF EXISTS facts_embedding_hnsw_${dims}`));
    for (let done = 0; done < liveFacts; done += 10_000) {
      const n = Math.min(10_000, liveFacts - done);
      await db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
        SELECT 'fct_seed_' || g, ${projectId}, 'big', 'user', 'likes', 'thing ' || g, 0.8, 'I like thing ' || g, now(),
          (SELECT array_agg((random() - 0.5)::real)::vector FROM generate_series(1, ${dims}::int) WHERE g IS NOT NULL)
        FROM generate_series(${done + 1}::int, ${done + n}::int) AS g`);
    }
    await ensureVectorIndexes(db, dims);
    await db.execute(sql`ANALYZE facts`);
    for (const line of userLines) {
      await bench.call("POST", `/v1/memory/working/threads/${thread.threadId}/messages`, {
        role: "user",
        content: line,
      });
    }
    // Summarise first (not measured), with extraction held back by disabling nothing: end, then run.
    await bench.call("POST", `/v1/threads/${thread.threadId}/end`);
    await bench.service.settle();
    const [{ id: episodeId }] = (
      (await db.execute(sql`SELECT id FROM episodes WHERE thread_id = ${thread.threadId as string}`)) as unknown as {
        rows: { id: string }[];
      }
    ).rows;
    // Summarise without extracting: mark extraction as not pending while the episode job runs.
    await db.execute(sql`UPDATE episodes SET semantic_status = 'skipped' WHERE id = ${episodeId}`);
    await runDueJobs(bench.service.deps);
    await db.execute(sql`UPDATE episodes SET semantic_status = 'pending' WHERE id = ${episodeId}`);
    if (efSearch !== undefined) await db.execute(sql.raw(`SET hnsw.ef_search = ${efSearch}`));
    fake.requests.length = 0;
    const statementsBefore = bench.statements();
    const started = performance.now();
    const outcome = await processSemantic(bench.service.deps, episodeId);
    const extractionMs = performance.now() - started;
    if (outcome !== "completed") throw new Error(`extraction ${outcome}`);
    return {
      liveFacts,
      newFacts,
      dimensions: dims,
      extractionMs,
      statements: bench.statements() - statementsBefore,
      modelCalls: fake.chatCalls().length,
      embeddingBatches: fake.embeddingCalls().length,
    };
  } finally {
    await bench.close();
    await fake.close();
  }
}

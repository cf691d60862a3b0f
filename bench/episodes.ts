import { sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { startFakeOpenAI } from "../tests/helpers/fake-openai";
import { benchService } from "./lib";

export interface EpisodeBenchResult {
  episodes: number;
  providerLatencyMs: { chat: number; embeddings: number };
  seconds: number;
  episodesPerSecond: number;
  chatCallsPerEpisode: number;
  embeddingBatchesPerEpisode: number;
}

/**
 * End `threads` threads at once (8 messages each) through HTTP on the Node.js host with its real
 * timer doorbell, and time until every episode is completed. The fake provider answers chat and
 * embedding calls after the given latencies.
 */
export async function benchEpisodes(
  threads: number,
  latency: { chat: number; embeddings: number },
): Promise<EpisodeBenchResult> {
  const fake = await startFakeOpenAI();
  fake.onStructured("episode_summary", (req) => ({
    summary: `Summary of ${req.messages.at(-1)?.content.length ?? 0} characters`,
    keyLearnings: ["likes benchmarks"],
  }));
  // Extraction follows each summary (a second model call); here it finds nothing, so the episode
  // costs its two summary-side calls plus one extraction call.
  fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
  const bench = await benchService({
    OPENAI_API_KEY: "bench",
    OPENAI_BASE_URL: fake.url,
    EMBEDDING_DIMENSIONS: "256",
  });
  try {
    const ids: string[] = [];
    for (let t = 0; t < threads; t++) {
      const thread = await bench.call("POST", "/v1/threads", { dataset: `bench-${t % 10}` });
      ids.push(thread.threadId as string);
      for (let m = 0; m < 8; m++) {
        await bench.call("POST", `/v1/memory/working/threads/${thread.threadId}/messages`, {
          role: m % 2 ? "assistant" : "user",
          content: `Message ${m}: I am planning a trip to Lisbon in May and I prefer trains over planes.`,
        });
      }
    }
    fake.endpointLatencyMs = { ...latency };
    fake.requests.length = 0;
    const started = performance.now();
    await Promise.all(ids.map((id) => bench.call("POST", `/v1/threads/${id}/end`)));
    for (;;) {
      const [row] = rowsOf<{ done: number }>(
        await bench.service.deps.db.execute(
          sql`SELECT count(*)::int AS done FROM episodes WHERE status IN ('completed', 'failed')`,
        ),
      );
      if (Number(row.done) >= threads) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const seconds = (performance.now() - started) / 1000;
    const statuses = rowsOf<{ status: string; n: number }>(
      await bench.service.deps.db.execute(sql`SELECT status, count(*)::int AS n FROM episodes GROUP BY status`),
    );
    const failed = statuses.find((s) => s.status === "failed");
    if (failed) throw new Error(`${failed.n} episodes failed: ${JSON.stringify(statuses)}`);
    return {
      episodes: threads,
      providerLatencyMs: latency,
      seconds,
      episodesPerSecond: threads / seconds,
      chatCallsPerEpisode: fake.chatCalls().length / threads,
      embeddingBatchesPerEpisode: fake.embeddingCalls().length / threads,
    };
  } finally {
    await bench.close();
    await fake.close();
  }
}

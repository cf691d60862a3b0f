import { sql } from "drizzle-orm";
import { rowsOf } from "../lib/db/rows";
import { benchService, percentile } from "./lib";

export interface PrepareBenchResult {
  messages: number;
  compacted: boolean;
  p50Ms: number;
  p99Ms: number;
  statementsPerPrepare: number;
}

/**
 * Prepare (messageLimit 20) on a thread of `messages` messages, seeded straight into the tables:
 * all un-compacted, or all but the newest 6 folded under a summary.
 */
export async function benchPrepare(messages: number, compacted: boolean, calls = 300): Promise<PrepareBenchResult> {
  const bench = await benchService();
  try {
    const db = bench.service.deps.db;
    const { threadId } = (await bench.call("POST", "/v1/threads", { dataset: "prep" })) as { threadId: string };
    const [{ project_id: projectId }] = rowsOf<{ project_id: string }>(
      await db.execute(sql`SELECT project_id FROM threads WHERE id = ${threadId}`),
    );
    const folded = compacted ? messages - 6 : 0;
    await db.execute(sql`
      INSERT INTO messages (id, project_id, thread_id, seq, role, content, compacted_at)
      SELECT 'msg_p' || g, ${projectId}, ${threadId}, g, CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
        'message number ' || g || ' with a little more text to make it a realistic chat line',
        CASE WHEN g <= ${folded} THEN now() END
      FROM generate_series(1, ${messages}) g`);
    if (compacted) {
      await db.execute(sql`
        INSERT INTO messages (id, project_id, thread_id, seq, role, content, is_summary, summary_from_seq, summary_to_seq)
        VALUES ('msg_psum', ${projectId}, ${threadId}, ${messages + 1}, 'system', 'The summary so far.', true, 1, ${folded})`);
    }
    await db.execute(sql`
      UPDATE threads SET last_seq = ${messages + (compacted ? 1 : 0)}, compacted_seq = ${folded},
        live_count = ${messages - folded} WHERE id = ${threadId}`);
    await db.execute(sql`ANALYZE`);
    for (let i = 0; i < 20; i++) await bench.call("POST", `/v1/memory/working/threads/${threadId}/prepare`);
    const before = bench.statements();
    const latencies: number[] = [];
    for (let i = 0; i < calls; i++) {
      const started = performance.now();
      await bench.call("POST", `/v1/memory/working/threads/${threadId}/prepare`);
      latencies.push(performance.now() - started);
    }
    latencies.sort((a, b) => a - b);
    return {
      messages,
      compacted,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      statementsPerPrepare: (bench.statements() - before) / calls,
    };
  } finally {
    await bench.close();
  }
}

import { patchProjectSettings } from "../lib/settings/store";
import { benchService, closedLoop, median } from "./lib";

export interface AddMessageResult {
  clients: number;
  p50Ms: number;
  p99Ms: number;
  messagesPerSecond: number;
  statementsPerRequest: number;
}

/**
 * Add message, in-process on the embedded database: `clients` concurrent loops append to their
 * own threads (as chat apps do), after a warm-up. Median of `runs` runs. Auto-compaction is off:
 * this measures the insert; an insert that compacts is a model call (see the compaction bench notes).
 */
export async function benchAddMessage(clients: number, opsPerRun: number, runs: number): Promise<AddMessageResult> {
  const bench = await benchService();
  try {
    await patchProjectSettings(
      { deps: bench.service.deps, projectId: bench.projectId },
      { working: { autoCompactThreshold: null } },
    );
    const threads = await Promise.all(
      Array.from({ length: clients }, () => bench.call("POST", "/v1/threads", { dataset: "bench" })),
    );
    const add = (i: number) =>
      bench.call("POST", `/v1/memory/working/threads/${threads[i % clients].threadId}/messages`, {
        role: i % 2 ? "assistant" : "user",
        content: `message ${i}: the user mentioned they are planning a trip to Lisbon in May`,
        tokens: { input: 12, output: 30, total: 42 },
      });
    await closedLoop(clients, 200, add); // warm-up: JIT, plan caches
    const before = bench.statements();
    const results = [];
    for (let r = 0; r < runs; r++) results.push(await closedLoop(clients, opsPerRun, add));
    const statementsPerRequest = (bench.statements() - before) / (opsPerRun * runs);
    return {
      clients,
      p50Ms: median(results.map((r) => r.p50)),
      p99Ms: median(results.map((r) => r.p99)),
      messagesPerSecond: median(results.map((r) => r.perSecond)),
      statementsPerRequest,
    };
  } finally {
    await bench.close();
  }
}

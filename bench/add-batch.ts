import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { patchProjectSettings } from "../lib/settings/store";
import { benchService, closedLoop, median, serveOverHttp } from "./lib";

export interface AddBatchResult {
  storage: "disk" | "memory";
  batchSize: number;
  clients: number;
  p50Ms: number;
  p99Ms: number;
  messagesPerSecond: number;
  statementsPerRequest: number;
}

/**
 * Batch add (`POST …/threads/{threadId}/messages:batch`) over HTTP on loopback through the Node.js
 * host's own server (functions/node-host.ts), on the default durable on-disk database
 * (PGLITE_DURABILITY=full) or in memory. `clients` loops, each on its own thread, send batches of
 * `batchSize`; the figure is messages per second, median of `runs` runs. Auto-compaction is off.
 */
export async function benchAddBatch(
  storage: "disk" | "memory",
  batchSize: number,
  clients: number,
  batchesPerRun: number,
  runs: number,
): Promise<AddBatchResult> {
  const dir = storage === "disk" ? mkdtempSync(join(tmpdir(), "memsvc-bench-batch-")) : undefined;
  const bench = await benchService({}, dir ? { dir: join(dir, "pglite"), durability: "full" } : undefined);
  const { base, close } = await serveOverHttp(bench);
  try {
    await patchProjectSettings(
      { deps: bench.service.deps, projectId: bench.projectId },
      { working: { autoCompactThreshold: null } },
    );
    const threads = await Promise.all(
      Array.from({ length: clients }, () => bench.call("POST", "/v1/threads", { dataset: "bench" })),
    );
    const add = async (i: number) => {
      const messages = Array.from({ length: batchSize }, (_, j) => ({
        role: j % 2 ? "assistant" : "user",
        content: `message ${i}.${j}: planning a trip to Lisbon in May`,
        tokens: { input: 12, output: 30, total: 42 },
      }));
      const res = await fetch(`${base}/v1/memory/working/threads/${threads[i % clients].threadId}/messages:batch`, {
        method: "POST",
        headers: { authorization: `Bearer ${bench.key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages }),
      });
      if (res.status !== 201) throw new Error(`batch add → ${res.status}: ${await res.text()}`);
      return res.json();
    };
    await closedLoop(clients, 10, add); // warm-up
    const before = bench.statements();
    const results = [];
    for (let r = 0; r < runs; r++) results.push(await closedLoop(clients, batchesPerRun, add));
    return {
      storage,
      batchSize,
      clients,
      p50Ms: median(results.map((r) => r.p50)),
      p99Ms: median(results.map((r) => r.p99)),
      messagesPerSecond: median(results.map((r) => r.perSecond)) * batchSize,
      statementsPerRequest: (bench.statements() - before) / (batchesPerRun * runs),
    };
  } finally {
    await close();
    await bench.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

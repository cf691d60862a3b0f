import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PgliteDurability } from "../lib/db/pglite-durability";
import { patchProjectSettings } from "../lib/settings/store";
import { benchService, closedLoop, median, serveOverHttp } from "./lib";

export interface DurabilityResult {
  durability: PgliteDurability;
  transport: "in-process" | "http";
  clients: number;
  p50Ms: number;
  p99Ms: number;
  messagesPerSecond: number;
  fsyncsPerWrite: number;
}

/**
 * Add message on an on-disk embedded database, durable (`full`, the default: every commit is
 * fsynced to the host file) or `fast` (fsync off), in-process (`app.request`) or over HTTP on
 * loopback (Node's fetch, keep-alive: one connection per client). Median of `runs` runs.
 */
export async function benchDurability(
  durability: PgliteDurability,
  transport: "in-process" | "http",
  clients: number,
  opsPerRun: number,
  runs: number,
): Promise<DurabilityResult> {
  const dir = mkdtempSync(join(tmpdir(), "memsvc-bench-durability-"));
  const bench = await benchService({}, { dir: join(dir, "pglite"), durability });
  // Over HTTP: the Node.js host's own server (functions/node-host.ts), as `npm start` runs it.
  // Over HTTP: the Node.js host's own server, as `npm start` runs it.
  const server = transport === "http" ? await serveOverHttp(bench) : undefined;
  try {
    await patchProjectSettings(
      { deps: bench.service.deps, projectId: bench.projectId },
      { working: { autoCompactThreshold: null } },
    );
    const threads = await Promise.all(
      Array.from({ length: clients }, () => bench.call("POST", "/v1/threads", { dataset: "bench" })),
    );
    const add = async (i: number) => {
      const path = `/v1/memory/working/threads/${threads[i % clients].threadId}/messages`;
      const body = { role: i % 2 ? "assistant" : "user", content: `message ${i}: planning a trip to Lisbon in May` };
      if (!server) return bench.call("POST", path, body);
      const res = await fetch(`${server.base}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bench.key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      if (res.status !== 201) throw new Error(`add message → ${res.status}`);
      return res.json();
    };
    await closedLoop(clients, 100, add); // warm-up
    const before = bench.syncs();
    const results = [];
    for (let r = 0; r < runs; r++) results.push(await closedLoop(clients, opsPerRun, add));
    return {
      durability,
      transport,
      clients,
      p50Ms: median(results.map((r) => r.p50)),
      p99Ms: median(results.map((r) => r.p99)),
      messagesPerSecond: median(results.map((r) => r.perSecond)),
      fsyncsPerWrite: (bench.syncs() - before) / (opsPerRun * runs),
    };
  } finally {
    await server?.close();
    await bench.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

import { fileURLToPath } from "node:url";
import { createMemoryClient } from "../packages/client/src/index";
import { benchService, median, serveOverHttp } from "./lib";
import { exitWithParent } from "./proc";

export interface ClientOverheadResult {
  calls: number;
  runs: number;
  /** Median latency of a GET /v1/threads/{id} over HTTP on loopback, raw fetch and through the client. */
  rawP50Ms: number;
  clientP50Ms: number;
  /** clientP50Ms - rawP50Ms, median over runs. */
  overheadMs: number;
  /** The client's own time per call with a fetch that answers at once (no network, no service). */
  stubbedCallUs: number;
  stubbedRawUs: number;
}

/**
 * What the TypeScript client (packages/client) adds to a call over raw `fetch`: the same
 * `GET /v1/threads/{id}` against the Node.js host over HTTP on loopback, raw and through the client,
 * interleaved call by call so both see the same machine; the figure is the difference of the
 * medians, median of `runs` runs (budget: ≤ 0.3 ms per call). Also the client's own cost with a
 * fetch that answers at once, which no network noise blurs.
 */
export async function benchClient(calls = 2000, runs = 5): Promise<ClientOverheadResult> {
  const bench = await benchService();
  const { base, close } = await serveOverHttp(bench);
  try {
    const thread = (await bench.call("POST", "/v1/threads", { dataset: "bench" })) as { threadId: string };
    const memory = createMemoryClient({ baseUrl: base, apiKey: bench.key });
    const raw = async () => {
      const res = await fetch(`${base}/v1/threads/${thread.threadId}`, {
        headers: { authorization: `Bearer ${bench.key}` },
      });
      if (res.status !== 200) throw new Error(`GET thread → ${res.status}`);
      return res.json();
    };
    const viaClient = () => memory.threads.get(thread.threadId);
    for (let i = 0; i < 200; i++) await Promise.all([raw(), viaClient()]); // warm-up (JIT, connections)

    const rawMedians: number[] = [];
    const clientMedians: number[] = [];
    const overheads: number[] = [];
    for (let r = 0; r < runs; r++) {
      const rawTimes: number[] = [];
      const clientTimes: number[] = [];
      for (let i = 0; i < calls; i++) {
        // Alternate which goes first, so neither always gets the warmer connection.
        const order = i % 2 ? [raw, viaClient] : [viaClient, raw];
        for (const op of order) {
          const t0 = performance.now();
          await op();
          (op === raw ? rawTimes : clientTimes).push(performance.now() - t0);
        }
      }
      rawMedians.push(median(rawTimes));
      clientMedians.push(median(clientTimes));
      overheads.push(median(clientTimes) - median(rawTimes));
    }
    const stubbed = await stubbedCost(calls * 5);
    return {
      calls,
      runs,
      rawP50Ms: median(rawMedians),
      clientP50Ms: median(clientMedians),
      overheadMs: median(overheads),
      stubbedCallUs: stubbed.clientUs,
      stubbedRawUs: stubbed.rawUs,
    };
  } finally {
    await close();
    await bench.close();
  }
}

/** Per-call cost with a fetch that answers at once: the client's own work (request, retries' bookkeeping, parsing). */
async function stubbedCost(calls: number) {
  const body = JSON.stringify({ threadId: "thr_x", dataset: "bench", tags: [], createdAt: new Date().toISOString() });
  const answer = async () =>
    new Response(body, { status: 200, headers: { "content-type": "application/json", "content-length": "90" } });
  const memory = createMemoryClient({ baseUrl: "http://stub.invalid", apiKey: "mk_bench", fetch: answer });
  const raw = async () => (await answer()).json();
  const time = async (op: () => Promise<unknown>) => {
    for (let i = 0; i < 1000; i++) await op();
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) await op();
    return ((performance.now() - t0) / calls) * 1000;
  };
  const rawUs = await time(raw);
  const clientUs = await time(() => memory.threads.get("thr_x"));
  return { rawUs, clientUs };
}

export function clientRows(r: ClientOverheadResult): string[] {
  return [
    `| GET thread over HTTP, raw fetch | ${r.rawP50Ms.toFixed(3)} | | | |`,
    `| GET thread over HTTP, TypeScript client | ${r.clientP50Ms.toFixed(3)} | | | +${r.overheadMs.toFixed(3)} ms per call over raw fetch (budget 0.3); ${r.stubbedCallUs.toFixed(0)} µs of client work per call with an instant fetch (raw: ${r.stubbedRawUs.toFixed(0)} µs) |`,
  ];
}

// `node --import tsx bench/client.ts [--quick]`: this measurement alone, as table rows.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  exitWithParent();
  const quick = process.argv.includes("--quick");
  const result = await benchClient(quick ? 500 : 2000, quick ? 3 : 5);
  for (const row of clientRows(result)) console.log(row);
  console.log(`CLIENT_RESULT ${JSON.stringify(result)}`);
}

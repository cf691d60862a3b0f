import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { npmStartArgs, REPO_ROOT } from "../dev/start-command";
import { patchProjectSettings } from "../lib/settings/store";
import { startBenchProvider } from "./embedding";
import { closedLoop, percentile } from "./lib";
import { CLOCK_TICKS_PER_SECOND, processCpuTicks, processMemory, wasmResidentKiB } from "./proc";
import { openSeeded, recallQueries, type SeedPlan, type SeedStore } from "./seed";

/** The server's RSS during one phase of the load (MiB), from /proc/<pid>/status every SAMPLE_MS. */
export interface PhaseMemory {
  phase: string;
  /** The largest VmRSS sampled during the phase. */
  peakMiB: number;
  /** The median VmRSS sampled during the phase: where the process settles under that load. */
  steadyMiB: number;
  /** VmRSS when the phase ended. */
  endMiB: number;
  /** VmHWM when the phase ended: the process's peak RSS since it started. */
  hwmMiB: number;
  /** The embedded database's WASM memory resident when the phase ended (part of VmRSS). */
  wasmResidentMiB: number;
  /** The server's CPU time (user + system) during the phase, per request made in it (ms). */
  cpuMsPerRequest: number;
  samples: number;
}

export interface ServerRssResult {
  plan: SeedPlan;
  nodeFlags: string[];
  phases: PhaseMemory[];
  /** Recall over HTTP against the server process, one client, provider 0 ms. */
  recallWithQuery: { p50Ms: number; p99Ms: number };
  recallNoQuery: { p50Ms: number; p99Ms: number };
  /** Recall with a query, one client, while 4 clients add messages. */
  recallUnderWrites: { p50Ms: number; p99Ms: number };
  addMessage: { clients: number; p50Ms: number; p99Ms: number; messagesPerSecond: number };
  startSeconds: number;
  /** The server process's memory for the bench's memory table: its VmHWM, and VmRSS and WASM at the end. */
  server: { peakRssMiB: number; rssMiB: number; wasmMiB: number };
}

const SAMPLE_MS = 100;
const mib = (kib: number) => Math.round(kib / 1024);

/**
 * Samples a process's RSS until stopped; `phase(name, requests)` closes the current phase (its
 * memory, and its CPU time per request) and starts the next.
 */
function rssSampler(pid: number) {
  let samples: number[] = [];
  let ticksBefore = processCpuTicks(pid) ?? 0;
  const read = () => {
    const m = processMemory(pid);
    if (m) samples.push(m.rssKiB);
    return m;
  };
  const timer = setInterval(read, SAMPLE_MS);
  const phases: PhaseMemory[] = [];
  return {
    phases,
    phase(name: string, requests: number) {
      const end = read();
      const ticks = processCpuTicks(pid) ?? ticksBefore;
      const sorted = [...samples].sort((a, b) => a - b);
      phases.push({
        phase: name,
        peakMiB: mib(sorted[sorted.length - 1] ?? Number.NaN),
        steadyMiB: mib(percentile(sorted, 50)),
        endMiB: mib(end?.rssKiB ?? Number.NaN),
        hwmMiB: mib(end?.hwmKiB ?? Number.NaN),
        wasmResidentMiB: mib(wasmResidentKiB(pid) ?? Number.NaN),
        cpuMsPerRequest: requests ? (((ticks - ticksBefore) / CLOCK_TICKS_PER_SECOND) * 1000) / requests : 0,
        samples: sorted.length,
      });
      samples = [];
      ticksBefore = ticks;
    },
    stop: () => clearInterval(timer),
  };
}

/** Spawns the Node.js host as `npm start` does and resolves with its base URL once it listens. */
async function startServer(env: Record<string, string>, nodeFlags: string[] | undefined) {
  const start = npmStartArgs();
  const args = nodeFlags ? [...nodeFlags, ...start.slice(-1)] : start;
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  // This bench process may end without reaching stopServer (exitWithParent): the server goes too.
  const killOnExit = () => child.kill("SIGTERM");
  process.once("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  const base = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const url = /Listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url) resolve(url);
    });
    child.once("exit", (code) => reject(new Error(`the server exited (${code}) before listening: ${out}`)));
  });
  return { child, base, nodeFlags: args.slice(0, -1) };
}

async function stopServer(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

/**
 * The server process's memory at `plan`'s size: the directory is seeded (or a kept one reused)
 * in this process, which then lets go of it; the Node.js host is spawned on it (on a copy of a
 * kept one, so every run starts from the same data) as `npm start` runs it (its own flags unless
 * `nodeFlags`), and driven over HTTP with the bench's load: recall without and with a query,
 * add message at 8 clients, then recall while 4 clients write. Its RSS is sampled from /proc
 * per phase.
 */
export async function benchServerRss(
  plan: SeedPlan,
  store: SeedStore,
  options: { nodeFlags?: string[]; quick: boolean; sharedBuffers?: string },
): Promise<ServerRssResult> {
  const dir = store.dir;
  if (!dir) throw new Error("server-rss needs a directory for the server to open");
  const fake = await startBenchProvider();
  const copy = store.keep ? mkdtempSync(join(tmpdir(), "memsvc-bench-")) : undefined;
  try {
    const env = { OPENAI_API_KEY: "bench", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: String(plan.dims) };
    const { bench, seed } = await openSeeded(plan, env, { ...store, dir });
    const key = bench.key;
    // As the add-message bench: this measures the insert, not a compaction's model call.
    await patchProjectSettings(
      { deps: bench.service.deps, projectId: bench.projectId },
      { working: { autoCompactThreshold: null } },
    );
    await bench.close();
    const served = copy ? join(copy, "pglite") : dir;
    if (copy) cpSync(dir, served, { recursive: true });
    const serverEnv = {
      ...env,
      PGLITE_DIR: served,
      PORT: "0",
      ADMIN_PASSWORD: "bench-password",
      LOG_LEVEL: "warn",
      ...(options.sharedBuffers ? { PGLITE_SHARED_BUFFERS: options.sharedBuffers } : {}),
    };
    return { plan, ...(await serveAndMeasure(serverEnv, options, key, seed.entityCount)) };
  } finally {
    await fake.close();
    if (copy) rmSync(copy, { recursive: true, force: true });
  }
}

/** Spawns the server on its directory, drives the load and samples it; stops it whatever happens. */
async function serveAndMeasure(
  env: Record<string, string>,
  options: { nodeFlags?: string[]; quick: boolean },
  key: string,
  entityCount: number,
) {
  const started = performance.now();
  const { child, base, nodeFlags } = await startServer(env, options.nodeFlags);
  const startSeconds = (performance.now() - started) / 1000;
  const sampler = rssSampler(child.pid as number);
  try {
    const load = await driveLoad(base, key, entityCount, options.quick, sampler.phase);
    const last = sampler.phases[sampler.phases.length - 1];
    const server = { peakRssMiB: last.hwmMiB, rssMiB: last.endMiB, wasmMiB: last.wasmResidentMiB };
    return { nodeFlags, phases: sampler.phases, startSeconds, server, ...load };
  } finally {
    sampler.stop();
    await stopServer(child);
  }
}

/** The bench's recall and add-message load over HTTP; `phase` is called as each part ends. */
async function driveLoad(
  base: string,
  key: string,
  entityCount: number,
  quick: boolean,
  phase: (name: string, requests: number) => void,
) {
  const call = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`POST ${path} → ${res.status}: ${await res.text()}`);
    return res.json() as Promise<Record<string, unknown>>;
  };
  const calls = quick ? 50 : 200;
  const queries = recallQueries(2 * calls, entityCount);
  const recalls = async (body: (i: number) => unknown) => {
    const latencies: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t0 = performance.now();
      await call("/v1/memory/recall", body(i));
      latencies.push(performance.now() - t0);
    }
    latencies.sort((a, b) => a - b);
    return { p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
  };
  await new Promise((resolve) => setTimeout(resolve, 1000));
  phase("started, idle", 0);
  for (let i = 0; i < 10; i++) await call("/v1/memory/recall", { dataset: "big", query: `warm ${i}` });
  const recallNoQuery = await recalls(() => ({ dataset: "big" }));
  phase("recall without a query, 1 client", calls);
  const recallWithQuery = await recalls((i) => ({ dataset: "big", query: queries[i] }));
  phase("recall with a query, 1 client", calls);

  const clients = 8;
  const threads = await Promise.all(Array.from({ length: clients }, () => call("/v1/threads", { dataset: "bench" })));
  let added = 0;
  const add = (i: number) => {
    added++;
    return call(`/v1/memory/working/threads/${threads[i % clients].threadId}/messages`, {
      role: i % 2 ? "assistant" : "user",
      content: `message ${i}: the user mentioned they are planning a trip to Lisbon in May`,
      tokens: { input: 12, output: 30, total: 42 },
    });
  };
  const writes = await closedLoop(clients, quick ? 500 : 3000, add);
  phase("add message, 8 clients", added);

  added = 0;
  let writing = true;
  const writers = Promise.all(
    Array.from({ length: 4 }, async (_, w) => {
      for (let i = w; writing; i += 4) await add(i);
    }),
  );
  const recallUnderWrites = await recalls((i) => ({ dataset: "big", query: `${queries[calls + i]} busy` }));
  writing = false;
  await writers;
  phase("recall with a query (1 client) while 4 clients add messages", calls + added);
  return {
    recallWithQuery,
    recallNoQuery,
    recallUnderWrites,
    addMessage: { clients, p50Ms: writes.p50, p99Ms: writes.p99, messagesPerSecond: writes.perSecond },
  };
}

/** The scenario's table rows: recall over HTTP, then the server's RSS per phase. */
export function serverRssRows(r: ServerRssResult): string[] {
  const at = `${r.plan.facts.toLocaleString("en")} facts + ${r.plan.neighbours.toLocaleString("en")} neighbours (${r.plan.dims} dims), server process (node ${r.nodeFlags.join(" ") || "without flags"})`;
  const ms = (x: number) => x.toFixed(1);
  return [
    `| recall, no query, over HTTP, ${at} | ${ms(r.recallNoQuery.p50Ms)} | ${ms(r.recallNoQuery.p99Ms)} | | |`,
    `| recall, with query, over HTTP, ${at} | ${ms(r.recallWithQuery.p50Ms)} | ${ms(r.recallWithQuery.p99Ms)} | | |`,
    `| add message over HTTP, 8 clients, ${at} | ${ms(r.addMessage.p50Ms)} | ${ms(r.addMessage.p99Ms)} | ${Math.round(r.addMessage.messagesPerSecond)} msg/s | |`,
    `| recall, with query, over HTTP while 4 clients add messages, ${at} | ${ms(r.recallUnderWrites.p50Ms)} | ${ms(r.recallUnderWrites.p99Ms)} | | |`,
    ...r.phases.map(
      (p) =>
        `| server RSS, ${p.phase}, ${at} | | | | peak ${p.peakMiB} MiB, steady ${p.steadyMiB} MiB, at end ${p.endMiB} MiB (WASM ${p.wasmResidentMiB} MiB), VmHWM ${p.hwmMiB} MiB; ${p.cpuMsPerRequest.toFixed(1)} ms CPU per request |`,
    ),
  ];
}

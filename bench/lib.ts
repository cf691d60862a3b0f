import { listen } from "../functions/listen";
import { createNodeService, type NodeServiceOptions } from "../functions/node";
import { createNodeServer } from "../functions/node-host";
import { createApiKey } from "../lib/api-keys";
import { parseConfig } from "../lib/config";
import { createPgliteDatabase } from "../lib/db/pglite";
import type { PgliteDurability, SyncCounter } from "../lib/db/pglite-durability";
import type { Database } from "../lib/db/types";
import { silentLogger } from "../lib/log";
import { createProject } from "../lib/projects";

/** Options for every bench database in this process (bench/child.ts sets them from the switches). */
export const benchDatabaseOptions: { sharedBuffers?: string } = {};

/**
 * The Node.js host in-process on a fresh embedded database (in memory unless `disk` names a new
 * directory), with a counted driver. `host.projectId` reuses a project of an existing directory
 * (a kept seed) instead of creating one.
 */
export async function benchService(
  env: Record<string, string> = {},
  disk?: { dir: string; durability: PgliteDurability },
  host: Pick<NodeServiceOptions, "clock" | "doorbell"> & { projectId?: string } = {},
) {
  let statements = 0;
  const database = await createPgliteDatabase({
    dir: disk?.dir ?? "memory://",
    durability: disk?.durability,
    onQuery: () => statements++,
    ...benchDatabaseOptions,
  });
  const config = parseConfig({ PGLITE_DIR: "memory://", ADMIN_PASSWORD: "bench-password", ...env });
  const { projectId, ...hostOptions } = host;
  const service = await createNodeService({
    config,
    database,
    log: silentLogger,
    sweepIntervalMs: false,
    ...hostOptions,
  });
  const project = projectId ? { id: projectId } : await createProject(service.deps, { name: "bench" });
  const { key } = await createApiKey({ deps: service.deps, projectId: project.id }, { name: "bench" });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await service.app.request(path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (res.status >= 300) throw new Error(`${method} ${path} → ${res.status}: ${await res.text()}`);
    return res.json() as Promise<Record<string, unknown>>;
  };
  const syncs = (database as unknown as { syncs: SyncCounter }).syncs;
  return {
    service,
    database,
    call,
    key,
    projectId: project.id,
    statements: () => statements,
    /** Host fsync calls made for the database so far (0 in memory or with durability off). */
    syncs: () => syncs.syncs,
    close: () => service.close(),
  };
}

export type Bench = Awaited<ReturnType<typeof benchService>>;

/**
 * The bench's service behind the Node.js host's own server (functions/node-host.ts) on a loopback
 * port, as `npm start` runs it: what the HTTP scenarios measure.
 */
export async function serveOverHttp(bench: Bench): Promise<{ base: string; close(): Promise<void> }> {
  const server = createNodeServer({
    fetch: bench.service.app.fetch,
    hostname: "127.0.0.1",
    keepAliveTimeoutMs: bench.service.deps.config.keepAliveTimeoutMs,
    headersTimeoutMs: bench.service.deps.config.headersTimeoutMs,
  });
  return {
    base: `http://127.0.0.1:${await listen(server)}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** This process's memory now and at its peak, and the embedded database's WASM memory (MiB). */
export function memoryNow(database?: Database) {
  const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
  const wasm = (database as unknown as { client?: { mod?: { HEAPU8?: Uint8Array } } } | undefined)?.client?.mod?.HEAPU8;
  return {
    rssMiB: mib(process.memoryUsage().rss),
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
    ...(wasm ? { wasmMiB: mib(wasm.byteLength) } : {}),
  };
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)];
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Runs `op` from `clients` concurrent loops until `total` operations are done. */
export async function closedLoop(clients: number, total: number, op: (i: number) => Promise<unknown>) {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = next++; i < total; i = next++) {
        const t0 = performance.now();
        await op(i);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = performance.now() - started;
  latencies.sort((a, b) => a - b);
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    perSecond: (total / elapsed) * 1000,
  };
}

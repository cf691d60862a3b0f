import { listen } from "../functions/listen";
import { createNodeService, type NodeServiceOptions } from "../functions/node";
import { createNodeServer } from "../functions/node-host";
import { createApiKey } from "../lib/api-keys";
import { parseConfig } from "../lib/config";
import { createPgDatabase } from "../lib/db/pg";
import { createPgliteDatabase } from "../lib/db/pglite";
import type { PgliteDurability, SyncCounter } from "../lib/db/pglite-durability";
import type { Database } from "../lib/db/types";
import { silentLogger } from "../lib/log";
import { createProject } from "../lib/projects";
import { createBenchDatabase, dropBenchDatabase, type ServerDatabase } from "./server-database";

/**
 * Options for every bench database in this process (bench/child.ts sets them from the switches):
 * PGlite's shared_buffers, or `serverUrl` (--database-url): every bench service then runs on a
 * fresh database of its own on that PostgreSQL server, through node-postgres as the service runs
 * with DATABASE_URL, and its close drops it (bench/server-database.ts).
 */
export const benchDatabaseOptions: { sharedBuffers?: string; serverUrl?: string } = {};
/** Variables every bench service in this process gets (bench/child.ts: `--metrics on`). */
export const benchEnv: Record<string, string> = {};

/**
 * The Node.js host in-process on a fresh embedded database (in memory unless `disk` names a new
 * directory), or with benchDatabaseOptions.serverUrl on a fresh database on that server (`disk`
 * does not apply), with a counted driver. `host.projectId` reuses a project of an existing
 * directory (a kept seed) or server database (`host.server`, see reopenBench) instead of creating one.
 */
export async function benchService(
  env: Record<string, string> = {},
  disk?: { dir: string; durability: PgliteDurability },
  host: Pick<NodeServiceOptions, "clock" | "doorbell"> & {
    projectId?: string;
    server?: ServerDatabase;
    /** PGlite's default pool whatever --shared-buffers says (a bulk load: see openSeeded). */
    defaultPool?: boolean;
  } = {},
) {
  let statements = 0;
  const onQuery = () => statements++;
  const { serverUrl, sharedBuffers, ...rest } = benchDatabaseOptions;
  const pgliteOptions = host.defaultPool || !sharedBuffers ? rest : { ...rest, sharedBuffers };
  const server = serverUrl ? (host.server ?? (await createBenchDatabase(serverUrl))) : undefined;
  const database = server
    ? createPgDatabase(server.url, { onQuery })
    : await createPgliteDatabase({
        dir: disk?.dir ?? "memory://",
        durability: disk?.durability,
        onQuery,
        ...pgliteOptions,
      });
  const config = parseConfig({
    PGLITE_DIR: "memory://",
    ...(server ? { DATABASE_URL: server.url } : {}),
    ADMIN_PASSWORD: "bench-password",
    ...benchEnv,
    ...env,
  });
  const { projectId, server: _server, defaultPool: _defaultPool, ...hostOptions } = host;
  const dropServer = async () => {
    if (server && serverUrl) await dropBenchDatabase(serverUrl, server);
  };
  const service = await createNodeService({
    config,
    database,
    log: silentLogger,
    sweepIntervalMs: false,
    // The seed takes the statistics once loaded (as the host would within STATISTICS_CHECK_MS).
    statisticsCheckMs: false,
    ...hostOptions,
  }).catch(async (err) => {
    await dropServer();
    throw err;
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
  const syncs = (database as unknown as { syncs?: SyncCounter }).syncs;
  // Once: reopenBench detaches a bench that its caller may still close after a failure.
  let closed: Promise<void> | undefined;
  const closeService = () => {
    closed ??= service.close();
    return closed;
  };
  return {
    service,
    database,
    call,
    key,
    projectId: project.id,
    /** The server database this service runs on (--database-url), else undefined (PGlite). */
    server,
    statements: () => statements,
    /** Host fsync calls made for the database so far (0 in memory, with durability off, or on a server). */
    syncs: () => syncs?.syncs ?? 0,
    /** Closes the service; a server database is dropped with it. */
    close: async () => {
      try {
        await closeService();
      } finally {
        await dropServer();
      }
    },
    /** Closes the service and its connections, keeping the server database (see reopenBench). */
    detach: closeService,
  };
}

export type Bench = Awaited<ReturnType<typeof benchService>>;

/**
 * The same server database and project behind a new service: every connection closed (after
 * `between`, e.g. a cluster restart) and new ones opened, as a process starting on it would.
 * The new bench owns the database (its close drops it). Server databases only.
 */
export async function reopenBench(bench: Bench, env: Record<string, string>, between?: () => unknown): Promise<Bench> {
  const server = bench.server;
  if (!server) throw new Error("reopenBench: a server database only");
  await bench.detach();
  try {
    await between?.();
    return await benchService(env, undefined, { projectId: bench.projectId, server });
  } catch (err) {
    const { serverUrl } = benchDatabaseOptions;
    if (serverUrl) await dropBenchDatabase(serverUrl, server);
    throw err;
  }
}

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

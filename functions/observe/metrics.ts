import { createHash, timingSafeEqual } from "node:crypto";
import type { Handler, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { Clock } from "../../lib/clock";
import type { Database } from "../../lib/db/types";
import { HttpError } from "../../lib/errors";
import { type JobQueueStats, jobQueueStats } from "../../lib/jobs/stats";
import { errorFields, type Logger } from "../../lib/log";
import { errorTypeOf, type Telemetry } from "../../lib/telemetry";
import type { AppEnv } from "../env";
import { routeTemplate } from "../request-log";

/**
 * The Node.js host's Prometheus metrics (prom-client), served at GET /metrics behind METRICS_TOKEN.
 * Loaded only when that variable is set (functions/observe/index.ts): a host without it neither
 * loads prom-client nor counts anything. Labels are bounded: route templates, never paths; job
 * and call kinds from fixed sets; statuses.
 */
export interface Metrics {
  registry: Registry;
  /** Counts and times every request (registered first in the app). */
  middleware: MiddlewareHandler<AppEnv>;
  /** GET /metrics: the text format, 401 without the bearer token. */
  handler: Handler<AppEnv>;
  /** What lib/ reports (model calls, jobs, episodes), for lib/telemetry.ts. */
  telemetry: Telemetry;
}

/** Request latency buckets, seconds: in-process recall and add message are milliseconds; chat is seconds. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Model calls take from ~100 ms (an embedding) to tens of seconds (a long summary). */
const CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120];
/** From an episode's end to its summary: seconds when the doorbell rings, minutes through the sweep. */
const LAG_BUCKETS = [1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];

export function createMetrics(options: { token: string; database: Database; clock: Clock; log: Logger }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "http_requests_total",
    help: "HTTP requests answered, by method, route template and status.",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const requestSeconds = new Histogram({
    name: "http_request_duration_seconds",
    help: "HTTP request latency until the response is ready, by method, route template and status.",
    labelNames: ["method", "route", "status"] as const,
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const telemetry = domainMetrics(registry);
  queueMetrics(registry, options);
  poolMetrics(registry, options.database);

  const middleware = createMiddleware<AppEnv>(async function countRequests(c, next) {
    const started = performance.now();
    try {
      await next();
    } finally {
      // No endpoint matched: one label for every such path (a scanner's paths are unbounded).
      const labels = { method: c.req.method, route: routeTemplate(c) ?? "unmatched", status: String(c.res.status) };
      requests.inc(labels);
      requestSeconds.observe(labels, (performance.now() - started) / 1000);
    }
  });

  const expected = digest(options.token);
  const handler: Handler<AppEnv> = async (c) => {
    const presented = /^Bearer (.+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      throw new HttpError(401, "Invalid metrics token");
    }
    return c.body(await registry.metrics(), 200, { "content-type": registry.contentType });
  };
  return { registry, middleware, handler, telemetry };
}

/** Both sides hashed first: equal lengths for the constant-time comparison, whatever was sent. */
const digest = (token: string) => createHash("sha256").update(token).digest();

/** Model calls, jobs and episode lag, as lib/ reports them (lib/telemetry.ts). */
function domainMetrics(registry: Registry): Telemetry {
  const calls = new Counter({
    name: "memory_provider_calls_total",
    help: "Model provider calls (after the client's own retries), by operation, kind and outcome (ok, error).",
    labelNames: ["operation", "kind", "outcome"] as const,
    registers: [registry],
  });
  const errors = new Counter({
    name: "memory_provider_errors_total",
    help: "Failed model provider calls, by operation, kind and error type (an HTTP status, timeout, connection, aborted, no_provider, invalid_response).",
    labelNames: ["operation", "kind", "error_type"] as const,
    registers: [registry],
  });
  const callSeconds = new Histogram({
    name: "memory_provider_call_duration_seconds",
    help: "Model provider call latency (a stream: until its reader is done), by operation and kind.",
    labelNames: ["operation", "kind"] as const,
    buckets: CALL_BUCKETS,
    registers: [registry],
  });
  const tokens = new Counter({
    name: "memory_provider_tokens_total",
    help: "Tokens the provider reported, by operation, kind and type (input, output).",
    labelNames: ["operation", "kind", "type"] as const,
    registers: [registry],
  });
  const jobRuns = new Counter({
    name: "memory_job_runs_total",
    help: "Background jobs run, by kind and outcome (done, later, error).",
    labelNames: ["kind", "outcome"] as const,
    registers: [registry],
  });
  const jobSeconds = new Histogram({
    name: "memory_job_duration_seconds",
    help: "Background job run time (its handler), by kind.",
    labelNames: ["kind"] as const,
    buckets: CALL_BUCKETS,
    registers: [registry],
  });
  const episodeLag = new Histogram({
    name: "memory_episode_lag_seconds",
    help: "From an episode's end (its thread idle or ended) to its summary's completion.",
    buckets: LAG_BUCKETS,
    registers: [registry],
  });
  return {
    modelCall(call) {
      const started = performance.now();
      const labels = { operation: call.operation, kind: call.kind };
      return ({ usage, error }) => {
        callSeconds.observe(labels, (performance.now() - started) / 1000);
        calls.inc({ ...labels, outcome: error === undefined ? "ok" : "error" });
        if (error !== undefined) errors.inc({ ...labels, error_type: errorTypeOf(error) });
        if (usage?.input) tokens.inc({ ...labels, type: "input" }, usage.input);
        if (usage?.output) tokens.inc({ ...labels, type: "output" }, usage.output);
      };
    },
    job(kind) {
      const started = performance.now();
      return (outcome) => {
        jobSeconds.observe({ kind }, (performance.now() - started) / 1000);
        jobRuns.inc({ kind, outcome });
      };
    },
    episodeCompleted(lagSeconds) {
      episodeLag.observe(lagSeconds);
    },
  };
}

/**
 * The job queue by kind, read at scrape time in one statement (lib/jobs/stats.ts) that both gauges
 * share: prom-client collects a scrape's metrics concurrently, so the first collect starts it and
 * the other awaits the same answer.
 */
function queueMetrics(registry: Registry, options: { database: Database; clock: Clock; log: Logger }) {
  let reading: Promise<JobQueueStats[] | undefined> | undefined;
  const read = () => {
    reading ??= jobQueueStats(options.database.db, options.clock.now())
      .catch((err) => {
        // The database is down: the rest of the scrape still answers (and /health says 503).
        options.log.warn("metrics: could not read the job queue", errorFields(err));
        return undefined;
      })
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };
  new Gauge({
    name: "memory_jobs",
    help: "Jobs in the queue by kind and state: scheduled (due later), due (waiting for a worker), running (leased).",
    labelNames: ["kind", "state"] as const,
    registers: [registry],
    async collect() {
      const stats = await read();
      if (!stats) return;
      this.reset();
      for (const s of stats) {
        this.set({ kind: s.kind, state: "scheduled" }, s.scheduled);
        this.set({ kind: s.kind, state: "due" }, s.due);
        this.set({ kind: s.kind, state: "running" }, s.running);
      }
    },
  });
  new Gauge({
    name: "memory_job_oldest_due_seconds",
    help: "How long the oldest due job not yet running has been due, by kind (0 when none is).",
    labelNames: ["kind"] as const,
    registers: [registry],
    async collect() {
      const stats = await read();
      if (!stats) return;
      this.reset();
      for (const s of stats) this.set({ kind: s.kind }, s.oldestDueSeconds);
    },
  });
}

/**
 * The database's connections. node-postgres: its pool's counts. The embedded database is one
 * connection in the process, shared by every request in turn: only its size (1) is reported.
 * Neon over HTTP has no connection to report.
 */
function poolMetrics(registry: Registry, database: Database) {
  const pool = (database as unknown as { pool?: { totalCount: number; idleCount: number; waitingCount: number } }).pool;
  new Gauge({
    name: "memory_db_pool_max",
    help: "Connections the database client may open (the embedded database: 1).",
    registers: [registry],
    collect() {
      if (database.kind === "pglite") this.set(1);
      else if (pool) this.set((pool as { options?: { max?: number } }).options?.max ?? 0);
    },
  });
  if (!pool) return;
  new Gauge({
    name: "memory_db_pool_connections",
    help: "node-postgres pool connections by state: idle, in_use.",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      this.set({ state: "idle" }, pool.idleCount);
      this.set({ state: "in_use" }, pool.totalCount - pool.idleCount);
    },
  });
  new Gauge({
    name: "memory_db_pool_waiting",
    help: "Queries waiting for a node-postgres pool connection.",
    registers: [registry],
    collect() {
      this.set(pool.waitingCount);
    },
  });
}

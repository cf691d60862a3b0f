import { acceptedKeys } from "../lib/accepted-keys";
import { backgroundJobs } from "../lib/background";
import { systemClock } from "../lib/clock";
import { type Config, type Env as ConfigEnv, parseConfig } from "../lib/config";
import { createNeonDatabase } from "../lib/db/neon";
import type { Deps } from "../lib/deps";
import { runsSweep } from "../lib/jobs/cron";
import { type Doorbell, jobCallbackUrl, qstashDoorbell, silentDoorbell } from "../lib/jobs/doorbell";
import { EDGE_JOB_CONCURRENCY, sweep } from "../lib/jobs/runner";
import { laneSlots } from "../lib/jobs/slots";
import { createLlm } from "../lib/llm/client";
import { warnIfNoProvider } from "../lib/llm/embedding-check";
import { createQueryEmbeddings } from "../lib/llm/query-embeddings";
import { createLogger, errorFields, type Logger } from "../lib/log";
import { usageBacklog } from "../lib/usage/backlog";
import { createApp } from "./app";

/**
 * The Cloudflare Worker entry. Configuration comes from the Worker's env (vars and secrets);
 * the Neon client is made per request (HTTP, stateless), never held at module scope.
 * The env: what wrangler.toml declares (`Env`, generated into worker-configuration.d.ts by
 * `npm run worker:types`; CI fails when it drifts), plus the secrets and vars set outside it
 * (`wrangler secret put`, the dashboard), which only lib/config.ts reads.
 */
type WorkerEnv = Env & Partial<Record<keyof ConfigEnv, string>>;

/** Per isolate: a repeated recall query skips the provider for as long as the isolate lives. */
const queryEmbeddings = createQueryEmbeddings();
const usageBacklogOfIsolate = usageBacklog();
const acceptedKeysOfIsolate = acceptedKeys();

let cachedConfig: { env: WorkerEnv; config: Config } | undefined;
function configFor(env: WorkerEnv) {
  // A copy: an interface has no index signature, which the parser (any host's env) takes.
  if (cachedConfig?.env !== env) cachedConfig = { env, config: parseConfig({ ...env }) };
  return cachedConfig.config;
}

/** The logger at the Worker's LOG_LEVEL (a var in wrangler.toml or a secret), one per config. */
const loggers = new WeakMap<Config, Logger>();
function logOf(config: Config): Logger {
  const log = loggers.get(config) ?? createLogger({ level: config.logLevel });
  loggers.set(config, log);
  return log;
}

/**
 * QStash when it can complete the round trip: a token to publish, the public URL to deliver to
 * and both signing keys to verify the delivery (a message whose callback can only answer 401
 * would be retried into the dead-letter queue). Otherwise the cron sweep alone runs due jobs.
 */
function doorbellFor(config: Config): Doorbell {
  const { token, url, currentSigningKey, nextSigningKey } = config.qstash;
  if (!token || !config.publicBaseUrl || !currentSigningKey || !nextSigningKey) {
    if (token || config.publicBaseUrl || currentSigningKey || nextSigningKey) warnIncompleteQstash(config);
    return silentDoorbell;
  }
  return qstashDoorbell({
    token,
    baseUrl: url,
    callbackUrl: jobCallbackUrl(config.publicBaseUrl),
    clock: systemClock,
  });
}

let warnedIncomplete: Config | undefined;
function warnIncompleteQstash(config: Config) {
  if (warnedIncomplete === config) return;
  warnedIncomplete = config;
  logOf(config).warn("QStash is partly configured; jobs run from the cron sweep only", {
    missing: [
      !config.qstash.token && "QSTASH_TOKEN",
      !config.publicBaseUrl && "PUBLIC_BASE_URL",
      !config.qstash.currentSigningKey && "QSTASH_CURRENT_SIGNING_KEY",
      !config.qstash.nextSigningKey && "QSTASH_NEXT_SIGNING_KEY",
    ].filter(Boolean),
  });
}

function depsFor(env: WorkerEnv, ctx: Pick<ExecutionContext, "waitUntil">): Deps {
  const config = configFor(env);
  // Once per isolate's configuration: a Worker has no start of its own.
  warnIfNoProvider(config, logOf(config));
  if (!config.databaseUrl) throw new Error("DATABASE_URL is not set: the Worker needs a Neon database URL");
  const database = createNeonDatabase(config.databaseUrl, { fetchEndpoint: config.neonFetchEndpoint });
  return {
    db: database.db,
    database,
    config,
    clock: systemClock,
    log: logOf(config),
    llm: createLlm(config),
    doorbell: doorbellFor(config),
    jobs: backgroundJobs,
    defer: (work) => ctx.waitUntil(work),
    queryEmbeddings,
    usageBacklog: usageBacklogOfIsolate,
    acceptedKeys: acceptedKeysOfIsolate,
    // Per invocation, unlike the caches above: workerd cancels an invocation that waits on a
    // promise another one resolves, so a sweep must never wait for a slot a sweep before it holds.
    jobSlots: laneSlots(EDGE_JOB_CONCURRENCY),
  };
}

let app: ReturnType<typeof createApp> | undefined;
function appFor(env: WorkerEnv) {
  app ??= createApp({
    deps: (c) => depsFor(c.env as WorkerEnv, c.executionCtx),
    corsOrigins: configFor(env).corsOrigins,
  });
  return app;
}

export default {
  fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext) {
    return appFor(env).fetch(request, env, ctx);
  },
  /**
   * A thin dispatcher: the configured trigger (lib/jobs/cron.ts; not a constant here, since
   * workerd takes every named export of the entry module for an entrypoint) or an empty cron (a
   * local poke that names none) runs the sweep; any other cron string is an error, not a no-op.
   */
  async scheduled(controller: ScheduledController, env: WorkerEnv, ctx: ExecutionContext) {
    if (!runsSweep(controller.cron)) throw new Error(`Unknown cron trigger: ${controller.cron}`);
    const deps = depsFor(env, ctx);
    try {
      await sweep(deps);
    } catch (err) {
      deps.log.error("sweep failed", errorFields(err));
      throw err;
    }
  },
} satisfies ExportedHandler<WorkerEnv>;

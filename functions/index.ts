import { systemClock } from "../lib/clock";
import { parseConfig } from "../lib/config";
import { createNeonDatabase } from "../lib/db/neon";
import type { Deps } from "../lib/deps";
import { consoleLogger } from "../lib/log";
import { createApp } from "./app";

/**
 * The Cloudflare Worker entry. Configuration comes from the Worker's env (vars and secrets);
 * the Neon client is made per request (HTTP, stateless), never held at module scope.
 */
type WorkerEnv = Record<string, unknown>;

let cachedConfig: { env: WorkerEnv; config: ReturnType<typeof parseConfig> } | undefined;
function configFor(env: WorkerEnv) {
  if (cachedConfig?.env !== env) cachedConfig = { env, config: parseConfig(env) };
  return cachedConfig.config;
}

function depsFor(env: WorkerEnv): Deps {
  const config = configFor(env);
  if (!config.databaseUrl) throw new Error("DATABASE_URL is not set: the Worker needs a Neon database URL");
  const database = createNeonDatabase(config.databaseUrl, { fetchEndpoint: config.neonFetchEndpoint });
  return { db: database.db, database, config, clock: systemClock, log: consoleLogger };
}

let app: ReturnType<typeof createApp> | undefined;
function appFor(env: WorkerEnv) {
  app ??= createApp({ deps: (c) => depsFor(c.env as WorkerEnv), corsOrigins: configFor(env).corsOrigins });
  return app;
}

export default {
  fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext) {
    return appFor(env).fetch(request, env, ctx);
  },
} satisfies ExportedHandler<WorkerEnv>;

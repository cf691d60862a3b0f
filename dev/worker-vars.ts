import { configSchema } from "../lib/config";

/**
 * The service's variables that `npm run dev` never passes to the Worker as `--var`s: secrets
 * (wrangler reads them from `.dev.vars` itself, and a `--var` would print them in its banner),
 * what the script sets itself (the database, QStash when it serves its own), and the Node.js
 * host's own (its port, the embedded database on disk, socket timeouts).
 */
const NOT_FORWARDED = new Set([
  "ADMIN_PASSWORD",
  "OPENAI_API_KEY",
  "EMBEDDING_API_KEY",
  "RERANK_API_KEY",
  "QSTASH_TOKEN",
  "QSTASH_CURRENT_SIGNING_KEY",
  "QSTASH_NEXT_SIGNING_KEY",
  "METRICS_TOKEN",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
  "PORT",
  "DATABASE_URL",
  "NEON_FETCH_ENDPOINT",
  "PGLITE_DIR",
  "PGLITE_DURABILITY",
  "PGLITE_SHARED_BUFFERS",
  "KEEP_ALIVE_TIMEOUT_MS",
  "HEADERS_TIMEOUT_MS",
]);

/**
 * Every other variable of the service's configuration (lib/config.ts) that is set in `env`: the
 * Worker reads the same settings as `npm start` does, so a variable that works there works here.
 */
export function forwardedWorkerVars(env: Record<string, string | undefined>): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const name of Object.keys(configSchema.shape)) {
    const value = env[name];
    if (!NOT_FORWARDED.has(name) && value !== undefined && value !== "") vars[name] = value;
  }
  return vars;
}

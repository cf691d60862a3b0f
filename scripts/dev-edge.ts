import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { bootstrapAdmin } from "../lib/auth";
import { systemClock } from "../lib/clock";
import { parseConfig } from "../lib/config";
import { migrateDatabase } from "../lib/db/migrate";
import { createPgliteDatabase } from "../lib/db/pglite";
import { startNeonHttpEndpoint } from "../lib/dev/neon-http-endpoint";
import { releaseAllLeases } from "../lib/jobs/store";

/**
 * `npm run dev`: the Worker under `wrangler dev` (workerd), offline. The Neon driver it uses is
 * pointed (NEON_FETCH_ENDPOINT) at a local SQL-over-HTTP endpoint backed by an embedded database
 * on disk (PGLITE_DIR, default .data/pglite-edge), migrated and with the admin bootstrapped here,
 * since the Worker does neither.
 *
 * Environment: PORT (wrangler dev's port, default 8787), NEON_HTTP_PORT (the endpoint's, default
 * any free one), and the service's own variables: the non-secret ones are passed to the Worker as
 * `--var`s; put secrets (OPENAI_API_KEY, ...) in `.dev.vars`, which wrangler reads itself.
 */
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const FORWARDED_VARS = [
  "ADMIN_USERNAME",
  "OPENAI_BASE_URL",
  "LLM_MODEL",
  "EMBEDDING_MODEL",
  "EMBEDDING_DIMENSIONS",
  "CORS_ORIGIN",
  "RETRY_INTERVAL_MS",
  "PUBLIC_BASE_URL",
  "QSTASH_URL",
] as const;

async function main() {
  const env = { ...process.env, PGLITE_DIR: process.env.PGLITE_DIR || ".data/pglite-edge" };
  const config = parseConfig(env);
  if (config.pgliteDir.startsWith("memory://")) console.log("Embedded database in memory: nothing is kept");

  const database = await createPgliteDatabase({ dir: config.pgliteDir, durability: config.pgliteDurability });
  await migrateDatabase(database, config.openai.embeddingDimensions);
  // This process alone holds the embedded database: leases left by an earlier run are released.
  await releaseAllLeases(database.db);
  // Only the database, config and clock are needed here: no model client or scheduler in this
  // process (background work is the Worker's).
  const admin = await bootstrapAdmin({ db: database.db, config, clock: systemClock });
  if (admin.generatedPassword) console.log(`Admin password: ${admin.generatedPassword}`);

  const endpoint = await startNeonHttpEndpoint({ database, port: Number(process.env.NEON_HTTP_PORT) || 0 });
  console.log(`SQL-over-HTTP endpoint on ${endpoint.fetchEndpoint} (embedded database at ${config.pgliteDir})`);

  const vars: Record<string, string> = {
    // Any well-formed URL: the endpoint serves one database and ignores the connection string.
    DATABASE_URL: "postgres://dev:dev@localhost/memory",
    NEON_FETCH_ENDPOINT: endpoint.fetchEndpoint,
  };
  for (const name of FORWARDED_VARS) {
    const value = process.env[name];
    if (value) vars[name] = value;
  }
  const args = [
    fileURLToPath(new URL("../node_modules/wrangler/bin/wrangler.js", import.meta.url)),
    "dev",
    "--ip",
    "127.0.0.1",
    "--port",
    String(config.port),
    ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ...process.argv.slice(2),
  ];
  // process.execPath: the Node.js that runs this script (22, from the `node` devDependency),
  // which wrangler requires.
  const wrangler = spawn(process.execPath, args, { cwd: ROOT, stdio: "inherit" });

  let shuttingDown = false;
  const shutdown = async (code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    await endpoint.close().catch(() => {});
    await database.close().catch(() => {});
    process.exit(code);
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => {
      // Let wrangler stop workerd first; we close the database once it has exited.
      if (wrangler.exitCode === null && wrangler.signalCode === null) wrangler.kill(signal);
      else void shutdown(0);
    });
  }
  wrangler.on("exit", (code, signal) => void shutdown(code ?? (signal ? 0 : 1)));
  wrangler.on("error", (err) => {
    console.error(`Could not start wrangler: ${err.message}`);
    void shutdown(1);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type CronSchedule, cronsOfWranglerToml, parseCron, startCronTicker } from "../dev/cron-ticker";
import { startNeonHttpEndpoint } from "../dev/neon-http-endpoint";
import { type LocalQStash, startLocalQStash } from "../dev/qstash-endpoint";
import { forwardedWorkerVars } from "../dev/worker-vars";
import { bootstrapAdmin } from "../lib/auth";
import { systemClock } from "../lib/clock";
import { parseConfig } from "../lib/config";
import { migrateDatabase } from "../lib/db/migrate";
import { createPgliteDatabase } from "../lib/db/pglite";
import { releaseAllLeases } from "../lib/jobs/store";

/**
 * `npm run dev`: the Worker under `wrangler dev` (workerd), offline. The Neon driver it uses is
 * pointed (NEON_FETCH_ENDPOINT) at a local SQL-over-HTTP endpoint backed by an embedded database
 * on disk (PGLITE_DIR, default .data/pglite-edge), migrated and with the admin bootstrapped here,
 * since the Worker does neither.
 *
 * Background work runs as deployed, with nothing to start by hand: wrangler dev fires no cron
 * triggers, so this script runs the Worker's scheduled handler on the crons of wrangler.toml
 * (every minute, and once at start: dev/cron-ticker.ts), and, unless you configured QStash
 * yourself, serves a local QStash (dev/qstash-endpoint.ts) that the Worker publishes its
 * doorbells to and that delivers them, signed, to its `POST /jobs/run` at their time.
 *
 * Environment: PORT (wrangler dev's port, default 8787), NEON_HTTP_PORT (the endpoint's, default
 * any free one), and the service's own variables: the non-secret ones are passed to the Worker as
 * `--var`s (dev/worker-vars.ts); put secrets (OPENAI_API_KEY, ...) in `.dev.vars`, which wrangler
 * reads itself.
 */
const ROOT = fileURLToPath(new URL("..", import.meta.url));

const QSTASH_VARS = ["QSTASH_TOKEN", "QSTASH_URL", "QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY"];

/**
 * The names wrangler dev will load from dotenv files: those of `--env-file`s when given, else
 * `.dev.vars`, else `.env` (wrangler's own order; names only, values are never read here).
 */
function devVarNames(argv: string[]): Set<string> {
  const envFiles: string[] = [];
  argv.forEach((arg, i) => {
    if (arg === "--env-file" && argv[i + 1]) envFiles.push(resolve(argv[i + 1]));
    else if (arg.startsWith("--env-file=")) envFiles.push(resolve(arg.slice("--env-file=".length)));
  });
  const files = envFiles.length > 0 ? envFiles : [join(ROOT, ".dev.vars")];
  if (envFiles.length === 0 && !existsSync(files[0])) files.push(join(ROOT, ".env"));
  const names = new Set<string>();
  for (const file of files) {
    if (!existsSync(file)) continue;
    for (const m of readFileSync(file, "utf8").matchAll(/^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/gm)) {
      names.add(m[1]);
    }
    if (envFiles.length === 0) break;
  }
  return names;
}

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
  Object.assign(vars, forwardedWorkerVars(process.env));
  const workerUrl = `http://127.0.0.1:${config.port}`;

  // Doorbells: a local QStash, unless QStash is configured for the Worker already (QSTASH_URL
  // here, or any QStash variable in the dotenv file wrangler loads): then that one is used.
  const ownQstash = Boolean(process.env.QSTASH_URL) || QSTASH_VARS.some((n) => devVarNames(process.argv).has(n));
  let qstash: LocalQStash | undefined;
  if (ownQstash) {
    console.log("QStash: your configuration (no local QStash started)");
  } else {
    qstash = await startLocalQStash({ log: { error: (message) => console.error(`[dev qstash] ${message}`) } });
    Object.assign(vars, {
      QSTASH_URL: qstash.url,
      QSTASH_TOKEN: qstash.token,
      QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
      PUBLIC_BASE_URL: vars.PUBLIC_BASE_URL ?? workerUrl,
    });
    console.log(`Local QStash on ${qstash.url}: doorbells are delivered to ${vars.PUBLIC_BASE_URL}/jobs/run`);
  }

  // The cron triggers: what wrangler.toml deploys, run by this script (wrangler dev runs none).
  const schedules: CronSchedule[] = [];
  for (const cron of cronsOfWranglerToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8"))) {
    const schedule = parseCron(cron);
    if (schedule) schedules.push(schedule);
    else
      console.warn(`Cron "${cron}" is not run locally; trigger it with: curl "${workerUrl}/cdn-cgi/local/scheduled"`);
  }

  const args = [
    fileURLToPath(new URL("../node_modules/wrangler/bin/wrangler.js", import.meta.url)),
    "dev",
    "--ip",
    "127.0.0.1",
    "--port",
    String(config.port),
    // `/__scheduled` as well as `/cdn-cgi/local/scheduled` runs the scheduled handler by hand,
    // and wrangler no longer warns that crons are not triggered locally (they are, below).
    "--test-scheduled",
    ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
    ...process.argv.slice(2),
  ];
  // process.execPath: the Node.js that runs this script (22, from the `node` devDependency),
  // which wrangler requires.
  const wrangler = spawn(process.execPath, args, { cwd: ROOT, stdio: "inherit" });

  const ticker = startCronTicker({
    baseUrl: workerUrl,
    schedules,
    log: {
      info: (message) => console.log(`[dev cron] ${message}`),
      error: (message) => console.error(`[dev cron] ${message}`),
    },
  });
  if (schedules.length > 0) {
    console.log(`Cron ${schedules.map((s) => `"${s.cron}"`).join(", ")}: run by this script (and once at start)`);
  }

  let shuttingDown = false;
  const shutdown = async (code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    ticker.stop();
    await qstash?.close().catch(() => {});
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

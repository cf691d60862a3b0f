import { acceptedKeys } from "../lib/accepted-keys";
import { bootstrapAdmin } from "../lib/auth";
import { backgroundJobs } from "../lib/background";
import { type Clock, systemClock } from "../lib/clock";
import type { Config } from "../lib/config";
import { warnIfIndexesOutgrowBufferPool } from "../lib/db/buffer-pool";
import { migrateDatabase } from "../lib/db/migrate";
import { createDatabase } from "../lib/db/node";
import { analyzeGrownTables, STATISTICS_CHECK_MS } from "../lib/db/pglite-statistics";
import { vacuumTables } from "../lib/db/pglite-vacuum";
import type { Database } from "../lib/db/types";
import type { Deps } from "../lib/deps";
import { type Doorbell, timerDoorbell } from "../lib/jobs/doorbell";
import { laneOfKey } from "../lib/jobs/kinds";
import { JOB_CONCURRENCY, runJobByKey, sweep } from "../lib/jobs/runner";
import { laneSlots } from "../lib/jobs/slots";
import { releaseAllLeases } from "../lib/jobs/store";
import { createLlm, type Llm } from "../lib/llm/client";
import { checkEmbeddingDimensions, warnIfNoProvider } from "../lib/llm/embedding-check";
import { createQueryEmbeddings } from "../lib/llm/query-embeddings";
import { consoleLogger, errorFields, type Logger } from "../lib/log";
import { settledWithin } from "../lib/settled-within";
import { usageBacklog } from "../lib/usage/backlog";
import { writeWaitingUsage } from "../lib/usage/sql";
import { createApp } from "./app";
import { dashboardAssets } from "./dashboard-assets";
import { startObservability } from "./observe";

export interface NodeServiceOptions {
  config: Config;
  /** An already-open database (tests pass a clone of a migrated template). */
  database?: Database;
  clock?: Clock;
  log?: Logger;
  llm?: Llm;
  /** Replace the timer doorbell (tests record rings and run jobs by hand). */
  doorbell?: Doorbell;
  /** Skip migrations when the database is known to be migrated (test clones). */
  migrate?: boolean;
  /** Where the built dashboard is (default: dist/ui, written by `npm run build:ui`). */
  dashboardDir?: string;
  /** Run the sweep on an interval (default: RETRY_INTERVAL_MS, the run contract's period); false for none. */
  sweepIntervalMs?: number | false;
  /**
   * The embedded database only: how often its tables are vacuumed where autovacuum would
   * (lib/db/pglite-vacuum.ts) and their planner statistics taken again where they grew
   * (lib/db/pglite-statistics.ts; default STATISTICS_CHECK_MS, and once at start); false for
   * never (tests and benchmarks, which take their own).
   */
  statisticsCheckMs?: number | false;
  /**
   * Check EMBEDDING_DIMENSIONS against the database and the embedding model before migrating
   * (default true; tests on a clone of the template skip it unless they test it).
   */
  checkEmbeddings?: boolean;
  /** How long close() lets running jobs finish before it closes the database (default SHUTDOWN_GRACE_MS). */
  shutdownGraceMs?: number;
}

/**
 * How long a shutdown waits for the jobs that are running to finish (jobs waiting for a slot are
 * not started). One still running then is cut off with the database: its lease runs out and it
 * runs again after the restart, as after a crash.
 */
export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * The Node.js host's service: one database for the process, migrated and bootstrapped, the
 * shared app over it, timers as the doorbell and an interval running the sweep.
 */
export async function createNodeService(options: NodeServiceOptions) {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const log = options.log ?? consoleLogger;
  const database = options.database ?? (await createDatabase(config));
  const llm = options.llm ?? createLlm(config);
  warnIfNoProvider(config, log);
  try {
    // Before the migrations, which would add indexes for a size the database does not hold.
    if (options.checkEmbeddings !== false) await checkEmbeddingDimensions({ db: database.db, config, llm, log });
    if (options.migrate !== false) await migrateDatabase(database, config.openai.embeddingDimensions);
  } catch (err) {
    await database.close();
    throw err;
  }

  // Deferred work (doorbell rings, jobs started by timers) is tracked so close() can wait for it.
  const inFlight = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    const settled = work.catch((err) => log.error("background work failed", errorFields(err)));
    inFlight.add(settled);
    settled.finally(() => inFlight.delete(settled));
    return settled;
  };
  // Timers fire jobs as they come due; at most JOB_CONCURRENCY run at once per lane, the sweep's
  // included (the provider, not the CPU, is the bound: 50 threads ended together must not open 100
  // model calls at once; and slow webhook receivers must not hold the model work's slots).
  const jobSlots = laneSlots(JOB_CONCURRENCY);
  // Tracked, so a shutdown lets a job the doorbell started finish before the database closes.
  const timers = options.doorbell
    ? undefined
    : timerDoorbell(clock, (key) => track(jobSlots[laneOfKey(key)](() => runJobByKey(deps, key))).then(() => {}), log);
  const deps: Deps = {
    db: database.db,
    database,
    config,
    clock,
    log,
    llm,
    doorbell: options.doorbell ?? (timers as Doorbell),
    jobs: backgroundJobs,
    defer: track,
    queryEmbeddings: createQueryEmbeddings(),
    usageBacklog: usageBacklog(),
    acceptedKeys: acceptedKeys(clock),
    jobSlots,
  };
  // The embedded database has one process (its directory lock): leases still held were held by
  // a process that is gone, so its jobs and episodes are released now rather than a lease later.
  if (database.kind === "pglite") {
    const released = await releaseAllLeases(database.db);
    if (released.jobs) log.info("released leases of a previous process", released);
    await warnIfIndexesOutgrowBufferPool(database.db, log);
  }
  const admin = await bootstrapAdmin(deps);
  // Set on a database that has users already, the password signs no one in: say so, once.
  if (!admin.created && config.adminPassword) {
    log.warn("ADMIN_PASSWORD is ignored: the database has dashboard users already", {
      hint: "npx memory-admin users reset-password <name> sets a user's password",
    });
  }
  // METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT: each loads its library only when set.
  const observability = await startObservability({ config, database, clock, log }).catch(async (err) => {
    await database.close();
    throw err;
  });
  const app = createApp({
    deps: () => deps,
    corsOrigins: config.corsOrigins,
    dashboardAssets: dashboardAssets(options.dashboardDir),
    observe: observability,
  });

  const intervalMs = options.sweepIntervalMs ?? config.retryIntervalMs;
  let sweeping: Promise<unknown> = Promise.resolve();
  /**
   * One sweep at a time per process; claiming with leases keeps several processes apart. The
   * periodic one leaves its jobs running in their slots ("background"): a job on a hung provider
   * must not hold back the next sweep (a budget's webhook, retries, idle timers). `runSweep()`
   * (tests, the start) waits for them.
   */
  const runSweep = (jobs: "await" | "background" = "await") => {
    sweeping = sweeping.then(() => sweep(deps, { jobs })).catch((err) => log.error("sweep failed", errorFields(err)));
    track(sweeping);
    return sweeping;
  };
  const interval = intervalMs === false ? undefined : setInterval(() => runSweep("background"), intervalMs);
  interval?.unref?.();
  if (intervalMs !== false) runSweep(); // catch up on work left by the previous run

  // A server's autovacuum vacuums and keeps its statistics; the embedded database has none to do
  // it. Vacuumed first, so that the statistics taken after count the rows it left.
  const statisticsMs = database.kind === "pglite" ? (options.statisticsCheckMs ?? STATISTICS_CHECK_MS) : false;
  const checkStatistics = () =>
    track(
      vacuumTables(database.db, log)
        .catch((err) => log.error("vacuum failed", errorFields(err)))
        .then(() => analyzeGrownTables(database.db, log)),
    );
  const statistics = statisticsMs === false ? undefined : setInterval(checkStatistics, statisticsMs);
  statistics?.unref?.();
  if (statisticsMs !== false) checkStatistics();

  /**
   * Resolves once every deferred piece of work has settled (tests, shutdown). Ledger rows waiting
   * for a request to carry them are written now rather than at their time, and so are the retries
   * of a write that failed (each deferred as the one before fails: hurried as they come, until
   * written or dropped); rows no write was deferred for are written last.
   */
  const settle = async () => {
    for (;;) {
      deps.usageBacklog.hurry();
      if (inFlight.size > 0) await Promise.race([...inFlight]);
      else if (deps.usageBacklog.pending > 0) await writeWaitingUsage(deps);
      else return;
    }
  };

  return {
    app,
    deps,
    admin,
    runSweep,
    /** The metrics and traces, when configured (tests flush the spans). */
    observability,
    settle,
    /**
     * Stops the timers; jobs waiting for a slot never start, and the running ones (and any other
     * deferred work) get `shutdownGraceMs` to finish before the database closes under them.
     */
    async close() {
      if (interval) clearInterval(interval);
      if (statistics) clearInterval(statistics);
      timers?.stop();
      for (const slots of Object.values(jobSlots)) slots.close();
      const graceMs = options.shutdownGraceMs ?? SHUTDOWN_GRACE_MS;
      if ((await settledWithin(settle(), graceMs)) === "late") {
        log.warn("shutting down with background work still running: its jobs run again after the restart", {
          running: inFlight.size,
          graceMs,
        });
      }
      try {
        await observability?.close();
      } finally {
        await database.close();
      }
    },
  };
}

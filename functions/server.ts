import { type Config, parseConfig } from "../lib/config";
import { consoleLogger, createLogger, errorFields } from "../lib/log";
import { settledWithin } from "../lib/settled-within";
import { startFailureMessage } from "../lib/start-failure";
import { listen } from "./listen";
import { createNodeService, SHUTDOWN_GRACE_MS } from "./node";
import { closeConnectionsAsResponsesEnd, createNodeServer } from "./node-host";

/**
 * `npm start`: the whole API on Node.js, with the embedded database unless DATABASE_URL is set.
 * package.json starts it with a smaller young generation, a slower-growing old one and V8's
 * smaller-code mode (`--optimize-for-size --max-semi-space-size=4 --heap-growing-percent=20`):
 * V8's defaults let the JS heap grow by ~110 MB under write load before collecting, which took
 * the server to ~390 MB of RSS at 100,000 facts; the heap flags bring the peak to ~300 MiB and
 * `--optimize-for-size` to ~288 MiB, for ~10% more CPU per write and no change to recall.
 * `--v8-pool-size=1` gives V8 one background thread instead of four: its background jobs
 * (TurboFan compiling the hot code of the compiled Postgres and of the JS, GC tasks) then run one
 * at a time, and the memory they malloc no longer adds up across threads (once freed, it stays
 * resident in the allocator). That takes the peak from ~289 MiB to ~240, with recall's and add
 * message's CPU per request unchanged (bench/RESULTS.md, `npm run bench -- --only server-rss`).
 */
/** The configuration, once read: a start failure's sentence names the database from it. */
let config: Config | undefined;

async function main() {
  // A log pipe that closes (`npm start | head -1`, a log shipper gone) must not take the server
  // down: the next write's EPIPE is an 'error' event, which unhandled ends the process.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  config = parseConfig(process.env);
  const log = createLogger({ level: config.logLevel });
  const service = await createNodeService({ config, log });
  if (service.admin.generatedPassword) {
    console.log(`Admin user created: ${config.adminUsername}`);
    console.log(`Admin password: ${service.admin.generatedPassword}`);
  }
  const server = createNodeServer({
    fetch: service.app.fetch,
    hostname: "127.0.0.1",
    keepAliveTimeoutMs: config.keepAliveTimeoutMs,
    headersTimeoutMs: config.headersTimeoutMs,
  });
  let port: number;
  try {
    port = await listen(server, config.port, "127.0.0.1");
  } catch (err) {
    // The port is taken: close the database (its lock too) before saying so.
    await service.close();
    throw err;
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    // No new connections; requests in flight get the grace to finish (idle keep-alive
    // connections close at once), then the rest are cut off. Then the jobs get theirs.
    const closed = new Promise<unknown>((resolve) => server.close(resolve));
    closeConnectionsAsResponsesEnd(server);
    if ((await settledWithin(closed, SHUTDOWN_GRACE_MS)) === "late") {
      log.warn("shutting down with requests still running: their connections are closed", {
        graceMs: SHUTDOWN_GRACE_MS,
      });
      server.closeAllConnections();
    }
    try {
      await service.close();
    } catch (err) {
      // Logged as such, not an unhandled rejection's stack; the exit says it was not clean.
      log.error("shutdown failed", errorFields(err));
      process.exit(1);
    }
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  // The ready line comes last: whoever waits for it may signal the server at once, and a signal
  // before the handlers were installed killed it (exit by signal, and npm start with it).
  console.log(`Listening on http://127.0.0.1:${port}`);
}

main().catch((err) => {
  // A cause the operator fixes (a variable, the port, the data directory) is one plain sentence.
  const message = startFailureMessage(err, config);
  if (message) console.error(message);
  else consoleLogger.error("failed to start", errorFields(err));
  process.exit(1);
});

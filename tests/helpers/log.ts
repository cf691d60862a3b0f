import { createLogger, LOG_LEVELS, type Logger, type LogLevel, silentLogger } from "../../lib/log";

/**
 * The service's own logs in tests. Quiet by default, so `npm test` prints the tests' output and
 * not the server's: in-process services are silent, child processes and Workers log warnings and
 * errors (kept with a child's output for a failure message). `TEST_LOG_LEVEL=debug` (or info, …)
 * shows them all when a test needs reading: `TEST_LOG_LEVEL=info npx vitest run tests/x.test.ts`.
 */
export function testLogLevel(fallback: LogLevel): LogLevel {
  const wanted = process.env.TEST_LOG_LEVEL?.trim().toLowerCase();
  return LOG_LEVELS.find((level) => level === wanted) ?? fallback;
}

/** The logger of an in-process test service: silent unless TEST_LOG_LEVEL asks for lines. */
export function testLogger(): Logger {
  return process.env.TEST_LOG_LEVEL ? createLogger({ level: testLogLevel("info") }) : silentLogger;
}

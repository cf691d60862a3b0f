import type { BenchArgs } from "./args";
import { benchDatabaseOptions, benchEnv, memoryNow } from "./lib";
import { exitWithParent } from "./proc";
import { runUnit, type Unit } from "./scenarios";

/**
 * One unit of `npm run bench` in its own process (started by run.ts), so its peak RSS is its
 * own: the Node.js host with its embedded database (or its connections to a server's database
 * made for the unit) and the bench's in-process client, nothing left over from the units before it. Prints one line of JSON after RESULT_MARK.
 */
export const RESULT_MARK = "@@bench-result@@";
/** `--metrics on`: the token the bench's services are given (nothing scrapes them during a run). */
const BENCH_METRICS_TOKEN = "bench-metrics-token-0123456789";

if (process.argv[1]?.endsWith("child.ts")) {
  exitWithParent();
  const { unit, args } = JSON.parse(process.argv[2]) as { unit: Unit; args: BenchArgs };
  if (args.sharedBuffers) benchDatabaseOptions.sharedBuffers = args.sharedBuffers;
  if (args.databaseUrl) benchDatabaseOptions.serverUrl = args.databaseUrl;
  if (args.metrics) benchEnv.METRICS_TOKEN = BENCH_METRICS_TOKEN;
  const r = await runUnit(unit, args);
  process.stdout.write(`${RESULT_MARK}${JSON.stringify({ ...r, memory: memoryNow() })}\n`);
}

import { matchesGlob, relative } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Every test: integration tests under tests/ (by surface: tests/README.md); unit tests of pure
 * decisions beside their file in lib/, functions/, dev/, bench/ and the client packages; the
 * packages' tests against the service in their own test/.
 */
export const ALL_TESTS = [
  "tests/**/*.test.ts",
  "lib/**/*.test.ts",
  "functions/**/*.test.ts",
  "dev/**/*.test.ts",
  "bench/**/*.test.ts",
  "packages/**/*.test.ts",
  "examples/**/*.test.ts",
];

/**
 * `npm run test:unit`: code that needs no database and no service: lib/, functions/, dev/ and
 * bench/ (but for
 * UNIT_EXCLUDED), the client's own code, the dashboard's pure helpers and the markdown links.
 * Under a minute on two cores.
 */
export const UNIT_TESTS = [
  "lib/**/*.test.ts",
  "functions/**/*.test.ts",
  "dev/**/*.test.ts",
  "bench/**/*.test.ts",
  "packages/client/src/**/*.test.ts",
  "tests/dashboard/ui-*.test.ts",
  "tests/docs/links.test.ts",
];

/**
 * Tests beside their code in lib/ and bench/ that start an embedded database and load data into
 * it (about 20-40 s of CPU each): they run with `npm run test:fast`, not as unit tests.
 */
export const UNIT_EXCLUDED = [
  "lib/db/pglite.test.ts",
  "lib/db/pglite-statements.test.ts",
  "lib/db/buffer-pool.test.ts",
  "bench/bulk-load.test.ts",
  "bench/seed.test.ts",
];

/**
 * `npm run test:slow`: the suites that start the service as a process and wait on it: `npm start`
 * killed with kill -9, fsync under strace, start failures, the README's quick start, load
 * (tests/process), the browser (tests/e2e) and the Python client against a served host.
 * `npm run test:fast` is everything else.
 */
export const SLOW_TESTS = ["tests/process/**/*.test.ts", "tests/e2e/**/*.test.ts", "packages/python/**/*.test.ts"];

const NODE_MODULES = ["**/node_modules/**"];

/**
 * Files that run for about a minute each, waiting on processes or a server: the slow set, the
 * admin command line and the server bench. They start first. Without timings of an earlier run
 * (a fresh clone, as in CI) vitest orders files by size, which put the Python suite (a small
 * file driving a minute's run) last in `npm test` and the server bench last in `npm run test:pg`,
 * each alone on one core for its minute while the other core had nothing left to do.
 */
export const LONG_TESTS = [...SLOW_TESTS, "tests/cli/cli.test.ts", "tests/db/bench-server.test.ts"];

class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const long = (file: TestSpecification) =>
      LONG_TESTS.some((glob) => matchesGlob(relative(file.project.config.root, file.moduleId), glob));
    return [...sorted.filter(long), ...sorted.filter((file) => !long(file))];
  }
}

// TESTS picks a set (the npm scripts set it); unset, `vitest run` runs every test, as `npm test`.
const set = process.env.TESTS;
if (set !== undefined && !["unit", "fast", "slow"].includes(set)) {
  throw new Error(`TESTS=${set}: expected unit, fast or slow (or unset for every test)`);
}

export default defineConfig({
  test: {
    include: set === "unit" ? UNIT_TESTS : set === "slow" ? SLOW_TESTS : ALL_TESTS,
    exclude:
      set === "fast"
        ? [...NODE_MODULES, ...SLOW_TESTS]
        : set === "unit"
          ? [...NODE_MODULES, ...UNIT_EXCLUDED]
          : NODE_MODULES,
    // The migrated template database every test service copies; unit tests open none.
    globalSetup: set === "unit" ? [] : ["tests/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // expect.poll's own default is one second: a page that fetches and then redirects (the
    // dashboard's stale ?offset=) took longer under CI's load and failed a run.
    expect: { poll: { timeout: 10_000 } },
    // Each file gets its own embedded database; two cores, so two files at a time (three were no
    // faster, and a timing test failed).
    pool: "forks",
    sequence: { sequencer: LongFirstSequencer },
    maxWorkers: 2,
    // A worker loads the service's modules once for all its files, not once per file: every file
    // builds its own service and database from them, and none mocks a module. Isolated, loading
    // them was 235 of `npm test`'s 994 s of test time (652 s wall against 502 s without).
    isolate: false,
    // Every statement the tests send is rendered by lib/db/compile.ts and by drizzle, and a
    // difference fails the test (services the tests start as processes inherit it).
    env: { SQL_COMPILE_CHECK: "1" },
  },
});

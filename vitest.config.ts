import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Integration tests under tests/; unit tests of pure decisions beside their file in lib/,
    // functions/, dev/, bench/ and the client packages; the packages' tests against the service in
    // their own test/.
    include: [
      "tests/**/*.test.ts",
      "lib/**/*.test.ts",
      "functions/**/*.test.ts",
      "dev/**/*.test.ts",
      "bench/**/*.test.ts",
      "packages/**/*.test.ts",
      "examples/**/*.test.ts",
    ],
    exclude: ["**/node_modules/**"],
    globalSetup: ["tests/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file gets its own embedded database; two cores, so two files at a time.
    pool: "forks",
    maxWorkers: 2,
  },
});

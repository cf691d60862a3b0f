import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Integration tests under tests/; unit tests of pure decisions beside their file in lib/.
    include: ["tests/**/*.test.ts", "lib/**/*.test.ts"],
    globalSetup: ["tests/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file gets its own embedded database; two cores, so two files at a time.
    pool: "forks",
    maxWorkers: 2,
  },
});

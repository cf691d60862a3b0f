import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

/**
 * `npm run test:pg` (scripts/test-postgres.sh, which starts a throwaway PostgreSQL server with
 * pgvector and sets TEST_PG_URL): the suites that exercise the database, run unchanged against
 * that server. Each test file's databases are `CREATE DATABASE ... TEMPLATE` copies of one migrated
 * from empty (tests/helpers/test-database.ts), reached through node-postgres, and the edge suites'
 * Neon HTTP stand-in is backed by the same server. docs/testing.md says why the others are left out.
 */
export const PG_SUITES = [
  // Every route, auth and isolation between projects.
  "tests/security.test.ts",
  "tests/fuzz.test.ts",
  "tests/fuzz-auth.test.ts",
  "tests/auth.test.ts",
  "tests/auth-first.test.ts",
  "tests/change-password.test.ts",
  // The admin command line on DATABASE_URL (it reads TEST_PG_URL).
  "tests/cli.test.ts",
  "tests/http.test.ts",
  "tests/idempotency.test.ts",
  "tests/idempotency-property.test.ts",
  "tests/mcp.test.ts",
  "tests/numbers.test.ts",
  "tests/numeric-inputs.test.ts",
  // Threads, working memory, episodes, facts.
  "tests/threads.test.ts",
  "tests/messages.test.ts",
  "tests/messages-batch.test.ts",
  "tests/compaction.test.ts",
  "tests/chat.test.ts",
  "tests/episodes.test.ts",
  "tests/episodic-api.test.ts",
  "tests/episode-triggers.test.ts",
  "tests/semantic-api.test.ts",
  "tests/semantic-rules.test.ts",
  "tests/full-size-embeddings.test.ts",
  "tests/project-stats.test.ts",
  "tests/dashboard.test.ts",
  "tests/dashboard-browse.test.ts",
  "tests/dashboard-projects.test.ts",
  // Recall and vector search (pgvector's HNSW on the server).
  "tests/recall.test.ts",
  "tests/recall-dataset.test.ts",
  "tests/recall-messages.test.ts",
  "tests/vector-search.test.ts",
  "tests/rerank.test.ts",
  // Statements per request.
  "tests/round-trips.test.ts",
  "tests/episodic-round-trips.test.ts",
  // Background work: jobs, leases, retries, extraction, webhooks, the QStash callback.
  "tests/jobs.test.ts",
  "tests/episode-job.test.ts",
  "tests/jobs-callback.test.ts",
  "tests/retry-interval.test.ts",
  "tests/faults.test.ts",
  "tests/semantic-extraction.test.ts",
  "tests/extraction-report.test.ts",
  "tests/webhooks.test.ts",
  // Concurrency and crashes: real parallel connections, and `npm start` killed with kill -9.
  "tests/load.test.ts",
  "tests/crash.test.ts",
  "tests/crash-episodes.test.ts",
  // The Worker under workerd, through the Neon HTTP stand-in backed by the server.
  "tests/edge/neon-endpoint.test.ts",
  "tests/edge/worker.test.ts",
  "tests/edge/jobs.test.ts",
  "tests/edge/idempotency.test.ts",
  "tests/edge/mcp.test.ts",
  "tests/edge/round-trips.test.ts",
];

if (!process.env.TEST_PG_URL) {
  throw new Error("vitest.pg.config.ts runs against a PostgreSQL server: use npm run test:pg (or set TEST_PG_URL)");
}

// The base config's test options with these files only (mergeConfig would add them to its include).
export default defineConfig({ ...base, test: { ...base.test, include: PG_SUITES } });

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
  "tests/auth/security.test.ts",
  "tests/api/fuzz.test.ts",
  "tests/auth/fuzz-auth.test.ts",
  "tests/auth/auth.test.ts",
  "tests/auth/auth-first.test.ts",
  "tests/auth/change-password.test.ts",
  // The admin command line on DATABASE_URL (it reads TEST_PG_URL).
  "tests/cli/cli.test.ts",
  "tests/api/http.test.ts",
  // Migrations from several processes at once, directly and through PgBouncer.
  "tests/db/migrate-race.test.ts",
  "tests/api/idempotency.test.ts",
  "tests/api/idempotency-property.test.ts",
  "tests/mcp/mcp.test.ts",
  "tests/api/numbers.test.ts",
  "tests/api/numeric-inputs.test.ts",
  // Threads, working memory, episodes, facts.
  "tests/working/threads.test.ts",
  "tests/working/messages.test.ts",
  "tests/working/messages-batch.test.ts",
  "tests/working/compaction.test.ts",
  "tests/working/chat.test.ts",
  "tests/episodic/episodes.test.ts",
  "tests/episodic/episodic-api.test.ts",
  "tests/episodic/episode-triggers.test.ts",
  "tests/episodic/cut-race.test.ts",
  "tests/recall/erase-race.test.ts",
  "tests/episodic/idle-backstop-scale.test.ts",
  "tests/semantic/semantic-api.test.ts",
  "tests/semantic/semantic-rules.test.ts",
  "tests/semantic/extraction-retry-scale.test.ts",
  "tests/semantic/fact-list-scale.test.ts",
  "tests/db/full-size-embeddings.test.ts",
  // Through PgBouncer in transaction mode, and JIT off on every session (migration 0021).
  "tests/db/pooler.test.ts",
  // `npm run bench -- --database-url` at a tiny size (skipped without a server).
  "tests/db/bench-server.test.ts",
  "tests/dashboard/project-stats.test.ts",
  "tests/dashboard/dashboard.test.ts",
  "tests/dashboard/dashboard-browse.test.ts",
  "tests/dashboard/dashboard-projects.test.ts",
  "tests/dashboard/dashboard-jobs.test.ts",
  // Recall and vector search (pgvector's HNSW on the server).
  "tests/recall/recall.test.ts",
  "tests/recall/recall-dataset.test.ts",
  "tests/recall/recall-messages.test.ts",
  // Messages' keyword statistics, a job's count and a deletion in two transactions at once.
  "tests/recall/message-terms.test.ts",
  "tests/recall/recall-degraded.test.ts",
  // A small dataset's keyword lookups read its own rows, not the keyword index.
  "tests/recall/keyword-scan.test.ts",
  "tests/recall/message-scan.test.ts",
  "tests/recall/vector-paths.test.ts",
  "tests/episodic/episode-paths.test.ts",
  "tests/usage/usage.test.ts",
  "tests/usage/ledger-locks.test.ts",
  "tests/recall/vector-search.test.ts",
  "tests/recall/rerank.test.ts",
  // Statements per request.
  "tests/api/round-trips.test.ts",
  "tests/episodic/episodic-round-trips.test.ts",
  // Background work: jobs, leases, retries, extraction, webhooks, the QStash callback.
  "tests/jobs/jobs.test.ts",
  "tests/jobs/bounded-batches.test.ts",
  "tests/episodic/episode-job.test.ts",
  "tests/jobs/jobs-callback.test.ts",
  "tests/jobs/retry-interval.test.ts",
  "tests/jobs/faults.test.ts",
  "tests/semantic/semantic-extraction.test.ts",
  "tests/semantic/extraction-report.test.ts",
  "tests/jobs/webhooks.test.ts",
  "tests/jobs/webhook-scale.test.ts",
  // Webhook deliveries in their own lane; a shutdown lets running jobs finish.
  "tests/jobs/job-lanes.test.ts",
  "tests/jobs/shutdown.test.ts",
  // Concurrency and crashes: real parallel connections, and `npm start` killed with kill -9.
  "tests/process/load.test.ts",
  "tests/process/crash.test.ts",
  "tests/process/crash-episodes.test.ts",
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

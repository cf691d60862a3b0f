import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll } from "vitest";
import { startNeonHttpEndpoint } from "../../dev/neon-http-endpoint";
import { systemClock } from "../../lib/clock";
import type { Database } from "../../lib/db/types";
import type { Deps } from "../../lib/deps";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";
import { openTestDatabase } from "./test-database";
import { buildWorkerBundle, workerConfig } from "./worker-bundle";

/** The built Worker under workerd with its database, for the edge tests that need nothing else. */
export interface EdgeWorker {
  mf: Miniflare;
  database: Database;
  /** What making a project and a key needs (the database and a clock). */
  deps: Deps;
  /** Statements of each SQL-over-HTTP request the Worker made, in order (each one a round trip). */
  sqlRequests: string[][];
  close(): Promise<void>;
}

/**
 * The Worker bundle `wrangler deploy --dry-run` produces, run by workerd in Miniflare, with the
 * Neon driver talking SQL-over-HTTP to a local endpoint on a fresh copy of the migrated template
 * (embedded, or on TEST_PG_URL's server).
 * No provider and no QStash: the tests that need them set up their own (tests/edge/jobs.test.ts).
 */
export async function startEdgeWorker(name: string): Promise<EdgeWorker> {
  const buildDir = mkdtempSync(join(tmpdir(), `memsvc-${name}-worker-`));
  const build = buildWorkerBundle(buildDir);
  const database = await openTestDatabase();
  const sqlRequests: string[][] = [];
  const endpoint = await startNeonHttpEndpoint({ database, onRequest: (queries) => sqlRequests.push(queries) });
  const text = (value: string) => ({ type: "text" as const, value });
  const mf = new Miniflare({
    workers: [
      {
        config: {
          ...workerConfig(await build),
          env: {
            DATABASE_URL: text("postgres://user:pass@localhost/db"),
            NEON_FETCH_ENDPOINT: text(endpoint.fetchEndpoint),
            EMBEDDING_DIMENSIONS: text(String(TEST_EMBEDDING_DIMENSIONS)),
            LOG_LEVEL: text("error"),
          },
        },
      },
    ],
  });
  await mf.ready;
  return {
    mf,
    database,
    deps: { db: database.db, database, clock: systemClock } as Deps,
    sqlRequests,
    async close() {
      await mf.dispose();
      await endpoint.close();
      await database.close();
      rmSync(buildDir, { recursive: true, force: true });
    },
  };
}

/**
 * The edge worker for one test file: started before its tests, closed after them. The object's
 * fields are filled in once it has started (read them inside tests and hooks).
 */
export function useEdgeWorker(name: string): EdgeWorker {
  const edge = {} as EdgeWorker;
  beforeAll(async () => {
    Object.assign(edge, await startEdgeWorker(name));
  }, 120_000);
  afterAll(async () => {
    await edge.close?.();
  });
  return edge;
}

import { listen } from "../../functions/listen";
import { createNodeService } from "../../functions/node";
import { createNodeServer } from "../../functions/node-host";
import { createApiKey } from "../../lib/api-keys";
import { login } from "../../lib/auth";
import { manualClock } from "../../lib/clock";
import { type ProviderDeadlines, parseConfig } from "../../lib/config";
import type { QueryHook } from "../../lib/db/types";
import type { Doorbell, DueJob } from "../../lib/jobs/doorbell";
import { createLlm } from "../../lib/llm/client";
import type { Logger } from "../../lib/log";
import { createProject } from "../../lib/projects";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";
import type { FakeOpenAI } from "./fake-openai";
import { testLogger } from "./log";
import { uniqueProjectName } from "./names";
import { openTestDatabase } from "./test-database";

export const ADMIN = { username: "admin", password: "admin-password-for-tests" };

export interface TestServiceOptions {
  env?: Record<string, string>;
  /** The fake provider to point the real `openai` client at (OPENAI_BASE_URL and a key). */
  provider?: FakeOpenAI;
  /**
   * "record" (default): rings are recorded and nothing runs by itself; tests run jobs with
   * `runDueJobs`/`sweep` on the manual clock. "timers": the Node.js host's real timer doorbell.
   */
  doorbell?: "record" | "timers";
  /** Use a manual clock (tests move time by hand). */
  manualTime?: boolean;
  onQuery?: QueryHook;
  /** Where the built dashboard is (default: the host's own, dist/ui). */
  dashboardDir?: string;
  /** "interval": the host's own sweep every RETRY_INTERVAL_MS. Default: none (tests call sweep). */
  sweep?: "interval";
  /** The provider client's timeout an attempt (default 5 s: tests fail fast). */
  llmTimeoutMs?: number;
  /** Shorter deadlines for a request's model calls (lib/config.ts PROVIDER_DEADLINES otherwise). */
  providerDeadlines?: Partial<ProviderDeadlines>;
  /** The service's logger (a test captures lines with its own). Default: testLogger(), silent. */
  log?: Logger;
  /** "host": the embedded host's own statistics check (at start, then on its period). Default: none. */
  statistics?: "host";
  /** How long close() lets running jobs finish (default 2 s: a test's hung call never holds afterAll long). */
  shutdownGraceMs?: number;
}

/**
 * A service on a fresh copy of the migrated template database (embedded, or a database of its own
 * on TEST_PG_URL's server: tests/helpers/test-database.ts). Close it in afterAll.
 */
export async function createTestService(options: TestServiceOptions = {}) {
  const database = await openTestDatabase({ onQuery: options.onQuery });
  const config = parseConfig({
    PGLITE_DIR: "memory://",
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
    CORS_ORIGIN: "http://dashboard.test",
    ...(options.provider ? { OPENAI_BASE_URL: options.provider.url, OPENAI_API_KEY: "test-key" } : {}),
    ...options.env,
  });
  config.providerDeadlines = { ...config.providerDeadlines, ...options.providerDeadlines };
  const clock = options.manualTime ? manualClock() : undefined;
  const rings: DueJob[] = [];
  const recordingDoorbell: Doorbell = {
    ring: async (jobs) => {
      rings.push(...jobs);
    },
  };
  const service = await createNodeService({
    config,
    database,
    migrate: false,
    // The template is migrated for TEST_EMBEDDING_DIMENSIONS; tests/provider/embedding-check.test.ts tests the check.
    checkEmbeddings: false,
    log: options.log ?? testLogger(),
    clock,
    dashboardDir: options.dashboardDir,
    // Fast retries in tests; the provider's own retry/backoff is tested in tests/provider/llm.test.ts.
    llm: createLlm(config, { maxRetries: 0, timeoutMs: options.llmTimeoutMs ?? 5_000 }),
    doorbell: options.doorbell === "timers" ? undefined : recordingDoorbell,
    sweepIntervalMs: options.sweep === "interval" ? undefined : false,
    // A test that reads plans takes its own statistics, or none.
    statisticsCheckMs: options.statistics === "host" ? undefined : false,
    shutdownGraceMs: options.shutdownGraceMs ?? 2_000,
  });
  const request = (path: string, init: RequestInit & { token?: string; json?: unknown } = {}) => {
    const headers = new Headers(init.headers);
    if (init.token) headers.set("authorization", `Bearer ${init.token}`);
    let body = init.body;
    if (init.json !== undefined) {
      headers.set("content-type", "application/json");
      body = JSON.stringify(init.json);
    }
    return service.app.request(path, { ...init, headers, body });
  };
  return { ...service, clock, request, rings };
}

export type TestService = Awaited<ReturnType<typeof createTestService>>;

/** An admin session token (through the real login path). */
export async function adminSession(service: TestService) {
  return (await login(service.deps, ADMIN.username, ADMIN.password)).token;
}

/**
 * A new project with one API key: each test makes its own, so tests share no state. The project
 * is named `name` and a random suffix (project names are unique).
 */
export async function newTenant(service: Pick<TestService, "deps">, name = "tenant") {
  const project = await createProject(service.deps, { name: uniqueProjectName(name) });
  const { key, apiKey } = await createApiKey({ deps: service.deps, projectId: project.id }, { name: `${name}-key` });
  return { projectId: project.id, projectName: project.name, key, keyId: apiKey.id };
}

/** The service on a real HTTP port (the Node.js host's server), for clients that need a URL. */
export async function serveOverHttp(service: TestService) {
  const server = createNodeServer({ fetch: service.app.fetch, keepAliveTimeoutMs: 5_000, headersTimeoutMs: 6_000 });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

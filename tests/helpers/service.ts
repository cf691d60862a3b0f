import { readFileSync } from "node:fs";
import { inject } from "vitest";
import { createNodeService } from "../../functions/node";
import { createApiKey } from "../../lib/api-keys";
import { login } from "../../lib/auth";
import { manualClock } from "../../lib/clock";
import { parseConfig } from "../../lib/config";
import { createPgliteDatabase } from "../../lib/db/pglite";
import type { QueryHook } from "../../lib/db/types";
import { silentLogger } from "../../lib/log";
import { createProject } from "../../lib/projects";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";

export const ADMIN = { username: "admin", password: "admin-password-for-tests" };

export interface TestServiceOptions {
  env?: Record<string, string>;
  /** Use a manual clock (tests move time by hand). */
  manualTime?: boolean;
  onQuery?: QueryHook;
}

/** A service on a fresh copy of the migrated template database. Close it in afterAll. */
export async function createTestService(options: TestServiceOptions = {}) {
  const template = new Blob([readFileSync(inject("templatePath"))]);
  const database = await createPgliteDatabase({ loadDataDir: template, onQuery: options.onQuery });
  const config = parseConfig({
    PGLITE_DIR: "memory://",
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
    CORS_ORIGIN: "http://dashboard.test",
    ...options.env,
  });
  const clock = options.manualTime ? manualClock() : undefined;
  const service = await createNodeService({ config, database, migrate: false, log: silentLogger, clock });
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
  return { ...service, clock, request };
}

export type TestService = Awaited<ReturnType<typeof createTestService>>;

/** An admin session token (through the real login path). */
export async function adminSession(service: TestService) {
  return (await login(service.deps, ADMIN.username, ADMIN.password)).token;
}

/** A new project with one API key: each test makes its own, so tests share no state. */
export async function newTenant(service: TestService, name = "tenant") {
  const project = await createProject(service.deps, name);
  const { key, apiKey } = await createApiKey(service.deps, { name: `${name}-key`, projectId: project.id });
  return { projectId: project.id, key, keyId: apiKey.id };
}

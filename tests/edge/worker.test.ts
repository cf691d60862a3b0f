import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { build as buildUi } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NeonHttpEndpoint, startNeonHttpEndpoint } from "../../dev/neon-http-endpoint";
import { createNodeService } from "../../functions/node";
import { login } from "../../lib/auth";
import { parseConfig } from "../../lib/config";
import type { Database } from "../../lib/db/types";
import { silentLogger } from "../../lib/log";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { testLogLevel } from "../helpers/log";
import { openTestDatabase } from "../helpers/test-database";
import { buildWorkerBundle, workerConfig, wranglerAssets } from "../helpers/worker-bundle";

/**
 * The edge host for real: the Worker bundle `wrangler deploy --dry-run` produces, run by workerd
 * in Miniflare, with the Neon serverless driver talking SQL-over-HTTP to a local endpoint backed
 * by a fresh copy of the migrated template. Only `dispatchFetch` reaches the Worker.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ADMIN = { username: "admin", password: "edge-admin-password" };

let buildDir: string;
let database: Database;
let endpoint: NeonHttpEndpoint;
let mf: Miniflare;
let node: Awaited<ReturnType<typeof createNodeService>>;
/** Statements of each SQL-over-HTTP request the Worker made, in order. */
const sqlRequests: string[][] = [];

beforeAll(async () => {
  buildDir = mkdtempSync(join(tmpdir(), "memsvc-worker-"));
  const build = buildWorkerBundle(buildDir);

  database = await openTestDatabase();
  // The admin is bootstrapped by the Node.js host's code on the same database (its password
  // hashed by Node's scrypt, verified below by workerd's).
  const config = parseConfig({
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_PASSWORD: ADMIN.password,
    EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
  });
  node = await createNodeService({ config, database, migrate: false, log: silentLogger });
  endpoint = await startNeonHttpEndpoint({ database, onRequest: (queries) => sqlRequests.push(queries) });
  // The dashboard as Workers static assets, configured by wrangler.toml's own [assets] table.
  await buildUi({
    configFile: join(ROOT, "ui/vite.config.ts"),
    logLevel: "silent",
    build: { outDir: join(buildDir, "assets/dashboard") },
  });
  const script = await build;

  const text = (value: string) => ({ type: "text" as const, value });
  mf = new Miniflare({
    workers: [
      {
        config: {
          ...workerConfig(script),
          assets: wranglerAssets(join(buildDir, "assets")),
          env: {
            DATABASE_URL: text("postgres://user:pass@localhost/db"),
            NEON_FETCH_ENDPOINT: text(endpoint.fetchEndpoint),
            EMBEDDING_DIMENSIONS: text(String(TEST_EMBEDDING_DIMENSIONS)),
            CORS_ORIGIN: text("http://dashboard.test"),
            // Errors only: request lines are info, the failures these tests provoke warn (TEST_LOG_LEVEL shows all).
            LOG_LEVEL: text(testLogLevel("error")),
          },
        },
      },
    ],
  });
  await mf.ready;
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
  await endpoint?.close();
  await database?.close();
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

interface CallInit {
  method?: string;
  token?: string;
  json?: unknown;
  headers?: Record<string, string>;
}

async function call(path: string, init: CallInit = {}) {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.json !== undefined) headers["content-type"] = "application/json";
  const res = await mf.dispatchFetch(`http://localhost${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers,
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  const body: any = text ? JSON.parse(text) : undefined;
  return { status: res.status, body };
}

/** A call, with the number of SQL-over-HTTP round trips the Worker made for it (calls not overlapping). */
async function callCounted(path: string, init: CallInit = {}) {
  const before = sqlRequests.length;
  const res = await call(path, init);
  return { ...res, roundTrips: sqlRequests.length - before };
}

async function adminSession(): Promise<string> {
  const { status, body } = await call("/auth/login", { json: ADMIN });
  expect(status).toBe(200);
  return body.token;
}

/** A project and an API key made through the dashboard, as an operator would. */
async function newTenant(session: string, name: string) {
  const project = await call("/dashboard/projects", { token: session, json: { name } });
  expect(project.status).toBe(201);
  const projectId: string = project.body.project.id;
  const key = await call("/dashboard/api-keys", { token: session, json: { name: `${name}-key`, projectId } });
  expect(key.status).toBe(201);
  return { projectId, key: key.body.key as string, keyId: key.body.apiKey.id as string };
}

async function newThread(key: string, dataset = "edge") {
  const res = await call("/v1/threads", { token: key, json: { dataset, tags: ["edge", "a,b"] } });
  expect(res.status).toBe(201);
  return res.body.threadId as string;
}

describe("the Worker under workerd, Neon driver over HTTP", () => {
  it("serves the dashboard as static assets with its headers, and the API behind the same prefix", async () => {
    const page = await mf.dispatchFetch("http://localhost/dashboard/");
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<div id="app">');
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");

    const script = html.match(/src="(\/dashboard\/assets\/[^"]+\.js)"/)?.[1];
    expect(script).toBeDefined();
    const asset = await mf.dispatchFetch(`http://localhost${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    await asset.arrayBuffer();

    // Paths that are not files reach the Worker: the session-guarded API, and the redirects.
    const api = await mf.dispatchFetch("http://localhost/dashboard/projects");
    expect(api.status).toBe(401);
    expect(await api.json()).toEqual({ error: "Missing or invalid Authorization header" });
    const root = await mf.dispatchFetch("http://localhost/", { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/dashboard/");
    await root.arrayBuffer();
    // The page's file by its name: the static assets' html_handling redirects it to the page (the
    // Node.js host does the same, tests/dashboard/dashboard-assets.test.ts).
    for (const path of ["/dashboard/index.html", "/dashboard/index"]) {
      const named = await mf.dispatchFetch(`http://localhost${path}`, { redirect: "manual" });
      expect({ path, status: named.status, location: named.headers.get("location") }).toEqual({
        path,
        status: 307,
        location: "/dashboard/",
      });
      await named.arrayBuffer();
    }
  });

  it("answers /health with the database up", async () => {
    expect(await call("/health")).toEqual({ status: 200, body: { status: "ok", services: { postgres: "ok" } } });
  });

  it("lists the dashboard's API keys with their total in one statement over the Neon driver", async () => {
    const session = await adminSession();
    const { projectId, keyId } = await newTenant(session, "edge-lists");
    sqlRequests.length = 0;
    const list = await call(`/dashboard/api-keys?projectId=${projectId}&limit=1`, { token: session });
    expect(list.status).toBe(200);
    expect(list.body.total).toBe(1);
    expect(list.body.apiKeys.map((k: { id: string }) => k.id)).toEqual([keyId]);
    expect(list.body.apiKeys[0].createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(sqlRequests.flat()).toHaveLength(2); // the session, then the page with its total
  });

  it("logs in (scrypt under workerd), rejects a wrong password, and knows the session", async () => {
    const wrong = await call("/auth/login", { json: { ...ADMIN, password: "not-the-password" } });
    expect(wrong).toEqual({ status: 401, body: { error: "Invalid username or password" } });

    const token = await adminSession();
    expect(token).toMatch(/^mk_sess_/);
    const me = await call("/auth/me", { token });
    expect(me.status).toBe(200);
    expect(me.body.user.username).toBe(ADMIN.username);
  });

  it("creates a dashboard user whose password the Worker hashed, and logs them in", async () => {
    const session = await adminSession();
    const username = `edge-user-${Date.now()}`;
    const created = await call("/dashboard/users", { token: session, json: { username, password: "s3cret-pass" } });
    expect(created.status).toBe(201);
    const viaWorker = await call("/auth/login", { json: { username, password: "s3cret-pass" } });
    expect(viaWorker.status).toBe(200);
    expect(viaWorker.body.user.username).toBe(username);
    // workerd's scrypt and Node's agree: the Node.js host accepts the hash the Worker wrote.
    expect((await login(node.deps, username, "s3cret-pass")).user.username).toBe(username);
  });

  it("creates a thread and appends, lists, prepares and counts messages", async () => {
    const { key } = await newTenant(await adminSession(), "edge-flow");
    // DESIGN's budget over HTTP: at most 2 sequential statements per /v1 request (authenticate, work).
    const roundTrips: Record<string, number> = {};
    const v1 = async (name: string, path: string, init: CallInit = {}) => {
      const res = await callCounted(path, { token: key, ...init });
      roundTrips[name] = Math.max(roundTrips[name] ?? 0, res.roundTrips);
      return res;
    };
    const created = await v1("create thread", "/v1/threads", {
      json: { dataset: "edge", tags: ["edge", "a,b", 'q"uote'] },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ dataset: "edge", tags: ["edge", "a,b", 'q"uote'], messageCount: 0 });
    expect(new Date(created.body.createdAt).toISOString()).toBe(created.body.createdAt);
    const threadId: string = created.body.threadId;

    const turns = [
      { role: "user", content: "Hello from the edge" },
      {
        role: "assistant",
        content: "Hi!",
        model: "m",
        latencyMs: 12.5,
        tokens: { input: 3, output: 2, total: 5 },
        metadata: { stopReason: "stop" },
      },
      { role: "user", content: "Third" },
    ];
    const seqs: number[] = [];
    for (const turn of turns) {
      const res = await v1("add message", `/v1/memory/working/threads/${threadId}/messages`, { json: turn });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ threadId, role: turn.role, compacted: false });
      seqs.push(res.body.sequenceNumber);
    }
    expect(seqs).toEqual([1, 2, 3]);

    const list = await v1("list messages", `/v1/memory/working/threads/${threadId}/messages`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 3, hasMore: false });
    expect(list.body.messages.map((m: { sequenceNumber: number }) => m.sequenceNumber)).toEqual([1, 2, 3]);
    expect(list.body.messages[1]).toMatchObject({
      role: "assistant",
      content: "Hi!",
      model: "m",
      latencyMs: 12.5,
      tokens: { input: 3, output: 2, total: 5 },
      metadata: { stopReason: "stop" },
      compactedAt: null,
    });

    const prepared = await v1("prepare", `/v1/memory/working/threads/${threadId}/prepare`, { json: {} });
    expect(prepared.status).toBe(200);
    expect(prepared.body).toMatchObject({ threadId, dataset: "edge", messageCount: 3, truncated: false });
    expect(prepared.body.messages.map((m: { content: string }) => m.content)).toEqual([
      "Hello from the edge",
      "Hi!",
      "Third",
    ]);

    const stats = await v1("stats", `/v1/memory/working/threads/${threadId}/stats`);
    expect(stats.status).toBe(200);
    expect(stats.body).toMatchObject({ threadId, messageCount: 3, byRole: { user: 2, assistant: 1 } });

    const thread = await v1("get thread", `/v1/threads/${threadId}`);
    expect(thread.body).toMatchObject({ threadId, messageCount: 3 });

    // At least one: the Worker really went through the SQL-over-HTTP endpoint.
    expect(Object.entries(roundTrips).filter(([, n]) => n < 1 || n > 2)).toEqual([]);
  });

  it("hands out gapless sequence numbers to concurrent appends", async () => {
    const { key } = await newTenant(await adminSession(), "edge-concurrent");
    const threadId = await newThread(key);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(`/v1/memory/working/threads/${threadId}/messages`, {
          token: key,
          json: { role: "user", content: `m${i}` },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(201));
    expect(results.map((r) => r.body.sequenceNumber).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("adds a batch of messages in one round trip after authentication over the Neon driver", async () => {
    const { key } = await newTenant(await adminSession(), "edge-batch");
    const [a, b] = [await newThread(key), await newThread(key)];
    const one = await callCounted(`/v1/memory/working/threads/${a}/messages:batch`, {
      token: key,
      json: {
        messages: [
          { role: "user", content: "old", createdAt: "2024-05-01T10:00:00Z", tokens: { input: 1 } },
          // Under the default autoCompactThreshold (20): crossing it compacts (statements of its own).
          ...Array.from({ length: 17 }, (_, i) => ({ role: "assistant", content: `r${i}` })),
        ],
      },
    });
    expect(one.status).toBe(201);
    expect(one.roundTrips).toBe(2); // the credential, then the one statement
    expect(one.body.messages.map((m: { sequenceNumber: number }) => m.sequenceNumber)).toEqual(
      Array.from({ length: 18 }, (_, i) => i + 1),
    );
    expect(one.body.messages[0].createdAt).toBe("2024-05-01T10:00:00.000Z");
    const cross = await callCounted("/v1/memory/working/messages:batch", {
      token: key,
      json: { messages: [b, a, b].map((threadId, i) => ({ threadId, role: "user", content: `c${i}` })) },
    });
    expect(cross.status).toBe(201);
    expect(cross.roundTrips).toBe(2);
    expect(
      cross.body.messages.map((m: { threadId: string; sequenceNumber: number }) => [m.threadId, m.sequenceNumber]),
    ).toEqual([
      [b, 1],
      [a, 19],
      [b, 2],
    ]);
    const missing = await call("/v1/memory/working/messages:batch", {
      token: key,
      json: {
        messages: [
          { threadId: a, role: "user", content: "x" },
          { threadId: "thr_nope", role: "user", content: "x" },
        ],
      },
    });
    expect(missing).toEqual({ status: 404, body: { error: "Thread not found" } });
    const early = await call(`/v1/memory/working/threads/${a}/messages:batch`, {
      token: key,
      json: { messages: [{ role: "user", content: "x", createdAt: "2024-01-01T00:00:00Z" }] },
    });
    expect(early.status).toBe(400);
    expect(early.body.issues.map((i: { path: unknown }) => i.path)).toEqual([["messages", 0, "createdAt"]]);
    const listed = await call(`/v1/memory/working/threads/${a}/messages?limit=1&order=desc`, { token: key });
    expect(listed.body).toMatchObject({ total: 19, messages: [{ sequenceNumber: 19, content: "c1" }] });
  });

  it("answers 401 without a key, with an unknown key and with a revoked key", async () => {
    const session = await adminSession();
    const { key, keyId } = await newTenant(session, "edge-auth");
    const threadId = await newThread(key);
    const path = `/v1/memory/working/threads/${threadId}/messages`;

    expect(await call(path)).toEqual({ status: 401, body: { error: "Missing or invalid Authorization header" } });
    expect(await call(path, { token: `mk_${"0".repeat(64)}` })).toEqual({
      status: 401,
      body: { error: "Invalid API key" },
    });
    // A session token is not an API key.
    expect((await call(path, { token: session })).status).toBe(401);

    expect((await call(`/dashboard/api-keys/${keyId}`, { method: "DELETE", token: session })).status).toBe(200);
    expect(await call(path, { token: key })).toEqual({ status: 401, body: { error: "API key has been revoked" } });
  });

  it("answers 404 for another project's thread", async () => {
    const session = await adminSession();
    const owner = await newTenant(session, "edge-owner");
    const other = await newTenant(session, "edge-other");
    const threadId = await newThread(owner.key);

    for (const res of [
      await call(`/v1/threads/${threadId}`, { token: other.key }),
      await call(`/v1/memory/working/threads/${threadId}/messages`, { token: other.key }),
      await call(`/v1/memory/working/threads/${threadId}/messages`, {
        token: other.key,
        json: { role: "user", content: "intrusion" },
      }),
      await call(`/v1/memory/working/threads/${threadId}/stats`, { token: other.key }),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    const list = await call(`/v1/memory/working/threads/${threadId}/messages`, { token: owner.key });
    expect(list.body.total).toBe(0);
  });

  it("reads a latin1 body as latin1 under workerd, as on Node.js", async () => {
    const { key } = await newTenant(await adminSession(), "edge-charset");
    const threadId = await newThread(key);
    const body = Uint8Array.from([...'{"role":"user","content":"Caf\u00e9"}'].map((ch) => ch.charCodeAt(0)));
    const res = await mf.dispatchFetch(`http://localhost/v1/memory/working/threads/${threadId}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json; charset=latin1" },
      body,
    });
    expect(res.status).toBe(201);
    const listed = await call(`/v1/memory/working/threads/${threadId}/messages`, { token: key });
    expect(listed.body.messages.map((m: { content: string }) => m.content)).toEqual(["Caf\u00e9"]);
  });

  it("answers a validation error with the spec's shape", async () => {
    const { key } = await newTenant(await adminSession(), "edge-validation");
    const threadId = await newThread(key);
    const res = await call(`/v1/memory/working/threads/${threadId}/messages`, {
      token: key,
      json: { role: "robot", content: "" },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("Validation error");
    expect(res.body.issues.map((i: { path: string[] }) => i.path.join("."))).toEqual(
      expect.arrayContaining(["role", "content"]),
    );
  });
});

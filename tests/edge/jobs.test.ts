import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type NeonHttpEndpoint, startNeonHttpEndpoint } from "../../dev/neon-http-endpoint";
import { createNodeService } from "../../functions/node";
import { createApiKey } from "../../lib/api-keys";
import { parseConfig } from "../../lib/config";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { EDGE_JOB_CONCURRENCY } from "../../lib/jobs/runner";
import { silentLogger } from "../../lib/log";
import { createProject } from "../../lib/projects";
import { createUser } from "../../lib/users";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { type FakeQStash, type PublishedMessage, startFakeQStash, type Transport } from "../helpers/fake-qstash";
import { testLogLevel } from "../helpers/log";
import { uniqueProjectName } from "../helpers/names";
import { openTestDatabase } from "../helpers/test-database";
import { buildWorkerBundle, workerConfig } from "../helpers/worker-bundle";

/**
 * Background work on the edge host for real: the Worker bundle under workerd (Miniflare), its
 * Neon driver on a local SQL-over-HTTP endpoint, its model calls on the fake provider and its
 * doorbells on a fake QStash. Two Workers from the same bundle share one workerd: one with
 * QStash configured, one without (the cron sweep alone must run its jobs).
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PUBLIC_BASE_URL = "https://memory.edge.test";
const CALLBACK_URL = `${PUBLIC_BASE_URL}/jobs/run`;
const WITH_QSTASH = "memory-service";
const CRON_ONLY = "memory-service-cron-only";
/** As CRON_ONLY, at LOG_LEVEL=info: its request lines are read back from workerd's logs. */
const LOGGING = "memory-service-logging";
/** As CRON_ONLY, with its embeddings on a server of their own (EMBEDDING_BASE_URL, EMBEDDING_API_KEY). */
const SPLIT = "memory-service-split-embeddings";
/** What the Workers wrote to the console (errors are printed as well, for a failing test). */
const workerLogs: { level: string; message: string }[] = [];
/** The cron triggers wrangler.toml deploys: the scheduled handler must know every one. */
const WRANGLER_CRONS = [...readFileSync(join(ROOT, "wrangler.toml"), "utf8").matchAll(/^crons\s*=\s*\[(.*)\]/gm)]
  .flatMap((m) => [...m[1].matchAll(/"([^"]+)"/g)])
  .map((m) => m[1]);

let buildDir: string;
let database: Database;
let endpoint: NeonHttpEndpoint;
let provider: FakeOpenAI;
let embeddingServer: FakeOpenAI;
let qstash: FakeQStash;
let mf: Miniflare;
let node: Awaited<ReturnType<typeof createNodeService>>;
/** Statements of each SQL-over-HTTP request the Workers made, in order (each one a round trip). */
const sqlRequests: string[][] = [];

beforeAll(async () => {
  buildDir = mkdtempSync(join(tmpdir(), "memsvc-worker-jobs-"));
  const build = buildWorkerBundle(buildDir);
  database = await openTestDatabase();
  // Projects and keys are made by the Node.js host's code on the same database; no sweep here,
  // so every job below is run by the Worker.
  node = await createNodeService({
    config: parseConfig({ EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) }),
    database,
    migrate: false,
    log: silentLogger,
    sweepIntervalMs: false,
  });
  endpoint = await startNeonHttpEndpoint({ database, onRequest: (queries) => sqlRequests.push(queries) });
  provider = await startFakeOpenAI();
  embeddingServer = await startFakeOpenAI();
  provider.onStructured("episode_summary", (request) => ({
    summary: `Edge summary of: ${request.messages.at(-1)?.content.slice(0, 200)}`,
    keyLearnings: [],
  }));
  qstash = await startFakeQStash();
  const script = await build;

  const text = (value: string) => ({ type: "text" as const, value });
  const common = {
    DATABASE_URL: text("postgres://user:pass@localhost/db"),
    NEON_FETCH_ENDPOINT: text(endpoint.fetchEndpoint),
    EMBEDDING_DIMENSIONS: text(String(TEST_EMBEDDING_DIMENSIONS)),
    OPENAI_API_KEY: text("test-key"),
    OPENAI_BASE_URL: text(provider.url),
    // Errors only: request lines are info, the failures these tests provoke warn (TEST_LOG_LEVEL shows all).
    LOG_LEVEL: text(testLogLevel("error")),
  };
  const worker = (name: string, env: Record<string, ReturnType<typeof text>>) => ({
    config: { ...workerConfig(script, name), env },
  });
  mf = new Miniflare({
    workers: [
      worker(WITH_QSTASH, {
        ...common,
        QSTASH_TOKEN: text(qstash.token),
        QSTASH_URL: text(qstash.url),
        QSTASH_CURRENT_SIGNING_KEY: text(qstash.currentSigningKey),
        QSTASH_NEXT_SIGNING_KEY: text(qstash.nextSigningKey),
        PUBLIC_BASE_URL: text(PUBLIC_BASE_URL),
      }),
      worker(CRON_ONLY, common),
      worker(LOGGING, { ...common, LOG_LEVEL: text("info") }),
      worker(SPLIT, {
        ...common,
        EMBEDDING_BASE_URL: text(embeddingServer.url),
        EMBEDDING_API_KEY: text("edge-embedding-key"),
      }),
    ],
    handleStructuredLogs: (log) => {
      workerLogs.push(log);
      if (log.level === "error") console.error(log.message);
    },
  });
  await mf.ready;
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
  await qstash?.close();
  await provider?.close();
  await embeddingServer?.close();
  await endpoint?.close();
  await node?.close();
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

/** What reaches one of the Workers: its `fetch` (the public URL is kept, as QStash calls it). */
async function transportTo(name: string): Promise<Transport> {
  const worker = await mf.getWorker(name);
  return (url, init) => worker.fetch(url, init as never) as unknown as Promise<Response>;
}

async function call(name: string, path: string, init: { method?: string; token?: string; json?: unknown } = {}) {
  const send = await transportTo(name);
  const res = await send(`${PUBLIC_BASE_URL}${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.json === undefined ? {} : { "content-type": "application/json" }),
    },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  const body: any = text ? JSON.parse(text) : undefined;
  return { status: res.status, body };
}

async function newTenant(name: string) {
  const project = await createProject(node.deps, { name: uniqueProjectName(name) });
  const { key } = await createApiKey({ deps: node.deps, projectId: project.id }, { name: `${name}-key` });
  return key;
}

/** A thread with two messages on `worker`. */
async function threadWithMessages(worker: string, key: string, marker: string) {
  const created = await call(worker, "/v1/threads", { token: key, json: { dataset: "edge-jobs" } });
  expect(created.status).toBe(201);
  const threadId: string = created.body.threadId;
  for (const content of [`${marker} prefers window seats`, "Got it."]) {
    const res = await call(worker, `/v1/memory/working/threads/${threadId}/messages`, {
      token: key,
      json: { role: "user", content },
    });
    expect(res.status).toBe(201);
  }
  return threadId;
}

async function endThread(worker: string, key: string, threadId: string) {
  const ended = await call(worker, `/v1/threads/${threadId}/end`, { method: "POST", token: key });
  expect(ended.status).toBe(200);
  expect(ended.body.episodeId).toMatch(/^epi_/);
  return ended.body.episodeId as string;
}

async function episodeStatus(worker: string, key: string, episodeId: string) {
  const res = await call(worker, `/v1/memory/episodic/episodes/${episodeId}`, { token: key });
  expect(res.status).toBe(200);
  return res.body.episode.status as string;
}

/** The message QStash holds for a job key (the ring runs after the response, so wait for it). */
async function messageFor(jobKey: string, timeoutMs = 5_000): Promise<PublishedMessage> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = qstash.messages.find((m) => JSON.parse(m.body).key === jobKey);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no QStash message for ${jobKey}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function scheduled(worker: string, cron: string) {
  return (await mf.getWorker(worker)).scheduled({ cron, scheduledTime: new Date() });
}

describe("the Worker with QStash: delayed messages to a verified jobs route", () => {
  it("publishes the idle timer after the response, and the episode job when the thread ends", async () => {
    const key = await newTenant("edge-qstash");
    const created = await call(WITH_QSTASH, "/v1/threads", { token: key, json: { dataset: "edge-jobs" } });
    const threadId: string = created.body.threadId;

    // QStash answers nothing until released: if the publish were in the request's path, the
    // response could not arrive before it.
    const release = qstash.hold();
    let idle: PublishedMessage;
    try {
      const added = await Promise.race([
        call(WITH_QSTASH, `/v1/memory/working/threads/${threadId}/messages`, {
          token: key,
          json: { role: "user", content: "henry prefers aisle seats" },
        }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the response waited on QStash")), 5_000)),
      ]);
      expect(added.status).toBe(201);
      idle = await messageFor(`idle:${threadId}`); // received by QStash, still unanswered
      expect(qstash.calls.some((c) => c.headers["upstash-deduplication-id"] === idle.deduplicationId)).toBe(false);
    } finally {
      release();
    }
    expect(idle).toMatchObject({
      destination: CALLBACK_URL,
      method: "POST",
      contentType: "application/json",
      body: JSON.stringify({ key: `idle:${threadId}` }),
      retries: 3,
    });
    // Due when the thread has been idle for the default 30 minutes (unix seconds).
    expect(idle.notBefore).toBeGreaterThan(Date.now() / 1000 + 29 * 60);
    expect(idle.notBefore).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 30 * 60);

    const episodeId = await endThread(WITH_QSTASH, key, threadId);
    const job = await messageFor(`episode:${episodeId}`);
    expect(job).toMatchObject({ destination: CALLBACK_URL, notBefore: undefined, retries: 3 });
    expect(job.deduplicationId).toMatch(/^episode_epi_[a-z0-9]+\.\d+$/);
  });

  it("runs the job on a signed delivery, and answers 401 to an unsigned or forged one", async () => {
    const key = await newTenant("edge-deliver");
    const threadId = await threadWithMessages(WITH_QSTASH, key, "iris");
    const episodeId = await endThread(WITH_QSTASH, key, threadId);
    const job = await messageFor(`episode:${episodeId}`);
    const toWorker = await transportTo(WITH_QSTASH);

    const forged: Parameters<FakeQStash["deliver"]>[2][] = [
      { signature: null },
      { key: { secret: "sig_forged" } },
      { signature: qstash.sign({ url: "https://elsewhere.test/jobs/run", body: job.body }) },
    ];
    for (const overrides of forged) {
      const res = await qstash.deliver(job, toWorker, overrides);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    }
    expect(await episodeStatus(WITH_QSTASH, key, episodeId)).toBe("pending");

    const res = await qstash.deliver(job, toWorker, { key: "next" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ran: true, key: `episode:${episodeId}` });
    expect(await episodeStatus(WITH_QSTASH, key, episodeId)).toBe("completed");
    // QStash delivers at least once: the duplicate finds nothing left to do.
    expect(await (await qstash.deliver(job, toWorker)).json()).toEqual({ ran: false, key: `episode:${episodeId}` });
  });
});

describe("webhooks on the Worker: the delivery job rings QStash like the others", () => {
  it("publishes the episode.completed delivery's job and runs it on delivery (the literal address check)", async () => {
    const project = await createProject(node.deps, { name: "edge-webhooks" });
    const { key } = await createApiKey({ deps: node.deps, projectId: project.id }, { name: "edge-webhooks-key" });
    // Stored directly: the registration check would refuse it. The Worker cannot resolve names, so
    // what it checks is the URL's literal: a private address is refused without a request.
    await node.deps.db.execute(sql`
      INSERT INTO webhook_endpoints (id, project_id, url, secret, event_types)
      VALUES (${`whk_${project.id}`}, ${project.id}, 'https://10.0.0.1/hook', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        '["episode.completed"]'::jsonb)`);
    const threadId = await threadWithMessages(WITH_QSTASH, key, "nina");
    const episodeId = await endThread(WITH_QSTASH, key, threadId);
    const toWorker = await transportTo(WITH_QSTASH);
    expect((await qstash.deliver(await messageFor(`episode:${episodeId}`), toWorker)).status).toBe(200);
    const [delivery] = rowsOf<{ id: string }>(
      await node.deps.db.execute(sql`SELECT id FROM webhook_deliveries WHERE project_id = ${project.id}`),
    );
    const job = await messageFor(`webhook:${delivery.id}`);
    expect(job).toMatchObject({ destination: CALLBACK_URL, notBefore: undefined, retries: 3 });
    const res = await qstash.deliver(job, toWorker);
    expect(await res.json()).toEqual({ ran: true, key: `webhook:${delivery.id}` });
    const [attempt] = rowsOf<{ error: string; status_code: number | null }>(
      await node.deps.db.execute(
        sql`SELECT error, status_code FROM webhook_attempts WHERE delivery_id = ${delivery.id}`,
      ),
    );
    expect(attempt).toEqual({
      status_code: null,
      error: expect.stringMatching(/^Refused: The address 10\.0\.0\.1 is private/),
    });
    // The retry is the same job again, rung for its time.
    await vi.waitFor(() => {
      const again = qstash.messages.filter((m) => JSON.parse(m.body).key === `webhook:${delivery.id}`);
      expect(again.length).toBe(2);
      expect(again[1].notBefore).toBeGreaterThan(Date.now() / 1000);
    });
  });
});

describe("the cron trigger: the scheduled handler runs the sweep", () => {
  it("completes a due episode whose doorbell never came, and rejects a cron it does not know", async () => {
    expect(WRANGLER_CRONS).toEqual(["* * * * *"]);
    const key = await newTenant("edge-cron");
    const threadId = await threadWithMessages(WITH_QSTASH, key, "jack");
    const episodeId = await endThread(WITH_QSTASH, key, threadId);
    await messageFor(`episode:${episodeId}`); // published, never delivered

    const unknown = await scheduled(WITH_QSTASH, "*/5 * * * *");
    expect(unknown.outcome).toBe("exception");
    expect(await episodeStatus(WITH_QSTASH, key, episodeId)).toBe("pending");

    for (const cron of WRANGLER_CRONS) expect((await scheduled(WITH_QSTASH, cron)).outcome).toBe("ok");
    expect(await episodeStatus(WITH_QSTASH, key, episodeId)).toBe("completed");
  });
});

describe("the Worker without QStash credentials", () => {
  it("publishes nothing, refuses callbacks, and the cron sweep alone completes the episode", async () => {
    const key = await newTenant("edge-cron-only");
    const published = qstash.messages.length;
    const threadId = await threadWithMessages(CRON_ONLY, key, "kate");
    const episodeId = await endThread(CRON_ONLY, key, threadId);

    const body = JSON.stringify({ key: `episode:${episodeId}` });
    const callback = await (await transportTo(CRON_ONLY))(CALLBACK_URL, {
      method: "POST",
      headers: { "content-type": "application/json", "upstash-signature": qstash.sign({ url: CALLBACK_URL, body }) },
      body,
    });
    expect(callback.status).toBe(401);
    expect(await callback.json()).toEqual({ error: "Job callbacks are not configured" });
    expect(await episodeStatus(CRON_ONLY, key, episodeId)).toBe("pending");

    expect((await scheduled(CRON_ONLY, "* * * * *")).outcome).toBe("ok");
    expect(await episodeStatus(CRON_ONLY, key, episodeId)).toBe("completed");
    expect(qstash.messages.length).toBe(published);
  });
});

describe("overlapping cron sweeps on the Worker", () => {
  it("a sweep runs EDGE_JOB_CONCURRENCY model jobs at once; the next runs the rest while those hang, and both end ok", async () => {
    const key = await newTenant("edge-overlap");
    const episodes: string[] = [];
    for (let i = 0; i <= EDGE_JOB_CONCURRENCY; i++) {
      episodes.push(await endThread(CRON_ONLY, key, await threadWithMessages(CRON_ONLY, key, `overlap${i}`)));
    }
    const completed = async () =>
      (await Promise.all(episodes.map((id) => episodeStatus(CRON_ONLY, key, id)))).filter((s) => s === "completed");
    provider.fail({ status: 200, times: EDGE_JOB_CONCURRENCY, endpoint: "chat", hang: true });
    const first = scheduled(CRON_ONLY, "* * * * *");
    await vi.waitFor(() => expect(provider.inFlight).toBe(EDGE_JOB_CONCURRENCY), { timeout: 20_000, interval: 50 });
    // The last episode waits for one of the sweep's slots (Cloudflare's 6 connections an
    // invocation), which the hung jobs hold: it is not run meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await completed()).toHaveLength(0);
    // The next minute's cron: its job slots are its own (an invocation that waited on a slot
    // another invocation frees is cancelled by workerd), so it runs the episode left over.
    expect((await scheduled(CRON_ONLY, "* * * * *")).outcome).toBe("ok");
    expect(await completed()).toHaveLength(1);
    provider.dropHung();
    expect((await first).outcome).toBe("ok");
  });
});

describe("recall, export and erase on the Worker", () => {
  it("recalls an extracted fact with episodes, exports the dataset as a stream and erases it", async () => {
    const key = await newTenant("edge-recall");
    provider.onStructured("fact_extraction", () => ({
      facts: [
        {
          subject: "user",
          predicate: "prefers",
          object: "window seats",
          objectIsEntity: false,
          confidence: 0.9,
          sourceQuote: "liam prefers window seats",
          validAt: null,
        },
      ],
      entities: [],
    }));
    const threadId = await threadWithMessages(CRON_ONLY, key, "liam");
    const episodeId = await endThread(CRON_ONLY, key, threadId);
    for (let i = 0; i < 2; i++) expect((await scheduled(CRON_ONLY, "* * * * *")).outcome).toBe("ok");
    expect(await episodeStatus(CRON_ONLY, key, episodeId)).toBe("completed");

    const send = await transportTo(CRON_ONLY);
    const res = await send(`${PUBLIC_BASE_URL}/v1/memory/recall`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ dataset: "edge-jobs", query: "seat preference", include: ["raw", "episodes"] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("server-timing")).toMatch(/embedding;dur=.*sql;dur=/);
    const recalled = (await res.json()) as {
      context: string;
      facts: { object: string; relevanceScore: number }[];
      episodes: { episodes: { episodeId: string }[]; episodeCount: number };
    };
    expect(recalled.facts.map((f) => f.object)).toEqual(["window seats"]);
    expect(recalled.context).toContain("- user prefers window seats (valid: ");
    expect(recalled.episodes).toMatchObject({ episodeCount: 1, episodes: [{ episodeId }] });

    const exported = await call(CRON_ONLY, "/v1/memory/recall/datasets/edge-jobs/export", { token: key });
    expect(exported.status).toBe(200);
    expect(exported.body.threads.map((t: { threadId: string }) => t.threadId)).toEqual([threadId]);
    expect(exported.body.facts.map((f: { object: string }) => f.object)).toEqual(["window seats"]);

    const erased = await call(CRON_ONLY, "/v1/memory/recall/datasets/edge-jobs", { method: "DELETE", token: key });
    expect(erased.body).toEqual({ dataset: "edge-jobs", deleted: { threads: 1, episodes: 1, facts: 1, entities: 0 } });
    const after = await call(CRON_ONLY, "/v1/memory/recall", { token: key, json: { dataset: "edge-jobs" } });
    expect(after.body).toMatchObject({ context: "", factCount: 0 });
  });

  it("recalls a message by a shared word right after its 201 (include messages), before its embedding", async () => {
    const key = await newTenant("edge-recall-words");
    const statement = "I moved to Lisbon last spring and I work as a nurse.";
    const say = async (threadId: string, content: string) => {
      const res = await call(CRON_ONLY, `/v1/memory/working/threads/${threadId}/messages`, {
        token: key,
        json: { role: "user", content },
      });
      expect(res.status).toBe(201);
      return res.body.messageId as string;
    };
    const created = await call(CRON_ONLY, "/v1/threads", { token: key, json: { dataset: "edge-words" } });
    const threadId: string = created.body.threadId;
    await say(threadId, "My favourite colour is green.");
    const said = await say(threadId, statement);

    const recalled = await call(CRON_ONLY, "/v1/memory/recall", {
      token: key,
      json: { dataset: "edge-words", query: "What do you know about Lisbon?", include: ["messages"] },
    });
    expect(recalled.status).toBe(200);
    const messages = recalled.body.messages as { messageId: string }[];
    expect(messages[0]).toMatchObject({ messageId: said, threadId, role: "user", content: statement });
    expect(messages.map((m) => m.messageId)).not.toContain(undefined);
    expect(recalled.body.context).toContain(`] user: ${statement}`);
    // Found by its keyword index, written with it: no embedding of it has been asked for yet.
    const embedded = provider.requests.filter(
      (r) => r.endpoint === "embeddings" && JSON.stringify(r.body.input).includes(statement),
    );
    expect(embedded).toEqual([]);
  });
});

describe("the request log on the Worker", () => {
  /** The JSON lines the Workers logged while `run` ran. */
  const linesDuring = async (run: () => Promise<unknown>) => {
    const before = workerLogs.length;
    await run();
    await new Promise((r) => setTimeout(r, 200)); // workerd hands its logs over asynchronously
    return workerLogs.slice(before).flatMap((l) => {
      try {
        return [JSON.parse(l.message) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  };

  it("writes one info line per request at LOG_LEVEL=info (route template, project, no stack), none at error", async () => {
    const key = await newTenant("edge-logs");
    const lines = await linesDuring(async () => {
      expect((await call(LOGGING, "/v1/threads", { token: key, json: { dataset: "logs" } })).status).toBe(201);
      expect((await call(LOGGING, "/v1/threads/thr_missing", { token: key })).status).toBe(404);
    });
    const requests = lines.filter((l) => l.message === "request");
    expect(requests).toEqual([
      expect.objectContaining({ level: "info", method: "POST", route: "/v1/threads", status: 201 }),
      expect.objectContaining({ level: "info", method: "GET", route: "/v1/threads/:id", status: 404 }),
    ]);
    expect(requests[0].projectId).toMatch(/^prj_/);
    expect(requests[0].durationMs).toEqual(expect.any(Number));
    expect(lines.filter((l) => "stack" in l)).toEqual([]);
    expect(JSON.stringify(lines)).not.toContain(key);

    const quiet = await linesDuring(() => call(CRON_ONLY, "/v1/threads/thr_missing", { token: key }));
    expect(quiet.filter((l) => l.message === "request")).toEqual([]);
  });
});

describe("a separate embedding server on the Worker (EMBEDDING_BASE_URL, EMBEDDING_API_KEY bindings)", () => {
  it("sends recall's query embedding there with its key, and chat to OPENAI_BASE_URL", async () => {
    const key = await newTenant("edge-split");
    const threadId = await threadWithMessages(SPLIT, key, "Split");
    const chatBefore = provider.requests.length;
    const recalled = await call(SPLIT, "/v1/memory/recall", {
      token: key,
      json: { dataset: "edge-jobs", query: "Which seats does the user like?" },
    });
    expect(recalled.status).toBe(200);
    expect(embeddingServer.requests).toMatchObject([
      {
        endpoint: "embeddings",
        authorization: "Bearer edge-embedding-key",
        body: { input: ["Which seats does the user like?"] },
      },
    ]);
    expect(provider.requests.slice(chatBefore)).toEqual([]);
    const chat = await call(SPLIT, `/v1/memory/working/threads/${threadId}/chat`, {
      token: key,
      json: { content: "Hello", recall: false },
    });
    expect(chat.status).toBe(200);
    expect(provider.requests.slice(chatBefore)).toMatchObject([{ endpoint: "chat", authorization: "Bearer test-key" }]);
    expect(embeddingServer.requests).toHaveLength(1);
  });
});

describe("the dashboard's failing jobs on the Worker", () => {
  it("lists a message-embed job that failed on the provider; retry makes it due, rings QStash and it runs", async () => {
    const project = await createProject(node.deps, { name: uniqueProjectName("edge-failing") });
    const { key } = await createApiKey({ deps: node.deps, projectId: project.id }, { name: "edge-failing-key" });
    const password = "edge-failing-jobs-password";
    await createUser(node.deps, { username: "edge-operator", password });
    const login = await call(CRON_ONLY, "/auth/login", { json: { username: "edge-operator", password } });
    expect(login.status).toBe(200);
    const session: string = login.body.token;
    const failingJobs = `/dashboard/projects/${project.id}/failing-jobs`;

    // Written on the Worker without QStash: the embedding job is not rung, only stored.
    const created = await call(CRON_ONLY, "/v1/threads", { token: key, json: { dataset: "edge-failing" } });
    const threadId: string = created.body.threadId;
    const said = await call(CRON_ONLY, `/v1/memory/working/threads/${threadId}/messages`, {
      token: key,
      json: { role: "user", content: "I moved to Lisbon last spring." },
    });
    expect(said.status).toBe(201);
    const [armed] = rowsOf<{ run_at: string }>(
      await node.deps.db.execute(sql`SELECT run_at::text FROM jobs WHERE key = ${`embed:${threadId}`}`),
    );
    // Due after the thread's quiet time (EMBED_DEBOUNCE_MS, on the real clock here).
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(armed.run_at) - Date.now()) + 50));

    provider.fail({ status: 503, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    try {
      expect((await scheduled(CRON_ONLY, "* * * * *")).outcome).toBe("ok");
    } finally {
      provider.clearFailures();
    }

    const before = sqlRequests.length;
    const listed = await call(CRON_ONLY, failingJobs, { token: session });
    expect(listed.status).toBe(200);
    expect(sqlRequests.length - before).toBe(2); // the session, then one statement
    expect(listed.body.total).toBe(1);
    const [job] = listed.body.jobs;
    expect(job).toMatchObject({
      kind: "message-embed",
      subject: threadId,
      dataset: "edge-failing",
      attempts: 1,
      running: false,
    });
    expect(job.error).toMatch(/503/);
    // Backed off 30 s from its failure, not due now.
    expect(Date.parse(job.nextRunAt)).toBeGreaterThan(Date.now() + 20_000);
    expect(Date.parse(job.nextRunAt)).toBeLessThanOrEqual(Date.now() + 30_000);

    // Retry now, on the Worker with QStash: due at once, and its doorbell rung (after the response).
    const asked = Date.now();
    const retried = await call(WITH_QSTASH, `${failingJobs}/${job.jobId}/retry`, { method: "POST", token: session });
    expect(retried.status).toBe(200);
    expect(retried.body.job).toMatchObject({ jobId: job.jobId, kind: "message-embed", subject: threadId });
    expect(Date.parse(retried.body.job.nextRunAt)).toBeGreaterThanOrEqual(asked - 1_000);
    expect(Date.parse(retried.body.job.nextRunAt)).toBeLessThanOrEqual(Date.now());
    const rung = await messageFor(`embed:${threadId}`);
    expect(rung).toMatchObject({ destination: CALLBACK_URL, notBefore: undefined });

    const delivered = await qstash.deliver(rung, await transportTo(WITH_QSTASH));
    expect(await delivered.json()).toEqual({ ran: true, key: `embed:${threadId}` });
    expect((await call(CRON_ONLY, failingJobs, { token: session })).body).toEqual({ jobs: [], total: 0 });
    const [vectors] = rowsOf<{ n: number }>(
      await node.deps.db.execute(
        sql`SELECT count(*)::int AS n FROM message_vectors v JOIN messages m ON m.id = v.message_id WHERE m.thread_id = ${threadId}`,
      ),
    );
    expect(Number(vectors.n)).toBe(1);
    const again = await call(CRON_ONLY, `${failingJobs}/${job.jobId}/retry`, { method: "POST", token: session });
    expect([again.status, again.body]).toEqual([404, { error: "Job not found" }]);
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeService } from "../../functions/node";
import { createApiKey } from "../../lib/api-keys";
import { systemClock } from "../../lib/clock";
import { parseConfig } from "../../lib/config";
import { rowsOf } from "../../lib/db/rows";
import { EARLY_DELIVERY_WAIT_MS } from "../../lib/jobs/callback";
import { deduplicationIdFor, jobCallbackUrl, QSTASH_MAX_DELAY_MS, qstashDoorbell } from "../../lib/jobs/doorbell";
import { scheduleJob } from "../../lib/jobs/store";
import { createLlm } from "../../lib/llm/client";
import type { Logger } from "../../lib/log";
import { createProject } from "../../lib/projects";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { type FakeQStash, type PublishedMessage, startFakeQStash } from "../helpers/fake-qstash";
import { uniqueProjectName } from "../helpers/names";
import { createTestService, type TestService } from "../helpers/service";
import { openTestDatabase } from "../helpers/test-database";

/**
 * `POST /jobs/run` on the Node.js host (the same app the Worker serves), with the QStash
 * doorbell publishing to a fake QStash and deliveries signed the way QStash signs them.
 */
const PUBLIC_BASE_URL = "https://memory.example.test";
const CALLBACK_URL = `${PUBLIC_BASE_URL}/jobs/run`;

let provider: FakeOpenAI;
let qstash: FakeQStash;
let svc: Awaited<ReturnType<typeof serviceWithQStash>>;
let unconfigured: TestService;

interface LogLine {
  level: "info" | "warn" | "error" | "debug";
  message: string;
  fields?: Record<string, unknown>;
}

/**
 * A Node.js service whose doorbell is the edge's: QStash (the fake) instead of timers, so the
 * routes' own rings publish messages the tests then deliver. Logs are captured.
 */
async function serviceWithQStash() {
  const database = await openTestDatabase();
  const config = parseConfig({
    PGLITE_DIR: "memory://",
    EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
    OPENAI_BASE_URL: provider.url,
    OPENAI_API_KEY: "test-key",
    QSTASH_TOKEN: qstash.token,
    QSTASH_URL: qstash.url,
    QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
    PUBLIC_BASE_URL,
  });
  const logs: LogLine[] = [];
  const log: Logger = {
    info: (message, fields) => logs.push({ level: "info", message, fields }),
    warn: (message, fields) => logs.push({ level: "warn", message, fields }),
    error: (message, fields) => logs.push({ level: "error", message, fields }),
    debug: (message, fields) => logs.push({ level: "debug", message, fields }),
  };
  const service = await createNodeService({
    config,
    database,
    migrate: false,
    log,
    llm: createLlm(config, { maxRetries: 0, timeoutMs: 5_000 }),
    doorbell: qstashDoorbell({
      token: qstash.token,
      baseUrl: qstash.url,
      callbackUrl: jobCallbackUrl(PUBLIC_BASE_URL),
      clock: systemClock,
    }),
    sweepIntervalMs: false,
  });
  const request = (path: string, init: { method?: string; token?: string; json?: unknown } = {}) =>
    service.app.request(path, {
      method: init.method ?? (init.json === undefined ? "GET" : "POST"),
      headers: {
        ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
        ...(init.json === undefined ? {} : { "content-type": "application/json" }),
      },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    });
  return { ...service, logs, request };
}

beforeAll(async () => {
  provider = await startFakeOpenAI();
  provider.onStructured("episode_summary", (request) => ({
    summary: `Summary of: ${request.messages.at(-1)?.content.slice(0, 200)}`,
    keyLearnings: [],
  }));
  qstash = await startFakeQStash();
  svc = await serviceWithQStash();
  // The Node.js host with no signing keys: callbacks are not configured.
  unconfigured = await createTestService({ provider, env: { PUBLIC_BASE_URL } });
});

afterAll(async () => {
  await svc?.close();
  await unconfigured?.close();
  await qstash?.close();
  await provider?.close();
});

/** A project and an API key of its own per test. */
async function newTenant(name: string) {
  const project = await createProject(svc.deps, { name: uniqueProjectName(name) });
  const { key } = await createApiKey({ deps: svc.deps, projectId: project.id }, { name: `${name}-key` });
  return { projectId: project.id, key };
}

/** Delivery through the app as QStash would reach it (the URL is the public one). */
const toApp = (url: string, init: RequestInit) => svc.app.request(url, init);

/** A delivery made by hand (not published by a ring), signed as QStash signs one, of this body. */
const signedDelivery = (body: string) =>
  qstash.deliver(
    {
      messageId: "msg_handmade",
      destination: CALLBACK_URL,
      body,
      contentType: "application/json",
      method: "POST",
      notBefore: undefined,
      delay: undefined,
      deduplicationId: undefined,
      retries: undefined,
      forwardHeaders: {},
      publishedAt: Date.now(),
    },
    toApp,
  );

async function json(res: Response) {
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  return (await res.json()) as any;
}

/** Summary calls whose transcript contains `marker` (each test writes its own words). */
const summaryCalls = (marker: string) =>
  provider
    .chatCalls()
    .filter(
      (c) =>
        c.response_format?.json_schema?.name === "episode_summary" &&
        c.messages.some((m) => m.content.includes(marker)),
    ).length;

async function episode(key: string, episodeId: string) {
  const res = await svc.request(`/v1/memory/episodic/episodes/${episodeId}`, { token: key });
  expect(res.status).toBe(200);
  return (await json(res)).episode;
}

/**
 * A tenant with a thread of two messages, ended: an episode is cut and its job is published to
 * QStash (after the response). Returns the published episode message, untouched.
 */
async function endedThread(marker: string) {
  const tenant = await newTenant(`jobs-${marker}`);
  const created = await svc.request("/v1/threads", { token: tenant.key, json: { dataset: "jobs" } });
  expect(created.status).toBe(201);
  const threadId: string = (await json(created)).threadId;
  for (const content of [`I am ${marker} and I like green tea`, "Noted!"]) {
    const res = await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
      token: tenant.key,
      json: { role: "user", content },
    });
    expect(res.status).toBe(201);
  }
  const ended = await svc.request(`/v1/threads/${threadId}/end`, { method: "POST", token: tenant.key });
  expect(ended.status).toBe(200);
  const episodeId: string = (await json(ended)).episodeId;
  expect(episodeId).toMatch(/^epi_/);
  await svc.settle(); // the rings were deferred past the response
  const jobKey = `episode:${episodeId}`;
  const message = qstash.messages.find((m) => JSON.parse(m.body).key === jobKey) as PublishedMessage;
  expect(message).toBeDefined();
  return { ...tenant, threadId, episodeId, jobKey, message };
}

describe("POST /jobs/run: a verified QStash delivery runs the job", () => {
  it("runs the episode job with the current key and answers only once the episode is written", async () => {
    const t = await endedThread("alice");
    expect((await episode(t.key, t.episodeId)).status).toBe("pending");
    provider.latencyMs = 150;
    try {
      const res = await qstash.deliver(t.message, toApp);
      expect(res.status).toBe(200);
      expect(await json(res)).toEqual({ ran: true, key: t.jobKey });
    } finally {
      provider.latencyMs = 0;
    }
    // No settle: the answer came after the write.
    const done = await episode(t.key, t.episodeId);
    expect(done.status).toBe("completed");
    expect(done.summary).toContain("alice");
    expect(summaryCalls("alice")).toBe(1);
  });

  it("accepts a signature made with the next signing key (key rotation)", async () => {
    const t = await endedThread("bob");
    const res = await qstash.deliver(t.message, toApp, { key: "next" });
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ ran: true, key: t.jobKey });
    expect((await episode(t.key, t.episodeId)).status).toBe("completed");
  });

  it("answers 401 {error} to anything not signed by QStash for this URL and body, and runs nothing", async () => {
    const t = await endedThread("carol");
    const now = Math.floor(Date.now() / 1000);
    const sign = (options: Partial<Parameters<FakeQStash["sign"]>[0]>) =>
      qstash.sign({ url: CALLBACK_URL, body: t.message.body, ...options });
    const other = await endedThread("carol-other");
    const cases: [string, Parameters<FakeQStash["deliver"]>[2]][] = [
      ["no signature", { signature: null }],
      ["not a JWT", { signature: "not-a-jwt" }],
      ["wrong key", { key: { secret: "sig_someone_else" } }],
      ["another URL", { signature: sign({ url: "https://evil.example.test/jobs/run" }) }],
      ["another path", { signature: sign({ url: `${PUBLIC_BASE_URL}/jobs/other` }) }],
      ["tampered body", { body: other.message.body }],
      ["expired", { signature: sign({ issuedAt: now - 3600 }) }],
      ["not yet valid", { signature: sign({ issuedAt: now + 3600 }) }],
      ["wrong issuer", { signature: sign({ issuer: "NotUpstash" }) }],
      ["unsigned token", { signature: `${sign({}).split(".").slice(0, 2).join(".")}.` }],
    ];
    for (const [name, overrides] of cases) {
      const res = await qstash.deliver(t.message, toApp, overrides);
      expect({ name, status: res.status }).toEqual({ name, status: 401 });
      expect(await json(res)).toEqual({ error: expect.any(String) });
    }
    // Nothing ran: both episodes are still pending, no model was called, and the jobs are still due.
    expect((await episode(t.key, t.episodeId)).status).toBe("pending");
    expect((await episode(other.key, other.episodeId)).status).toBe("pending");
    expect(summaryCalls("carol")).toBe(0);
    const res = await qstash.deliver(t.message, toApp);
    expect(await json(res)).toEqual({ ran: true, key: t.jobKey });
    expect((await episode(other.key, other.episodeId)).status).toBe("pending");
  });

  it("ignores QSTASH_DEV: the public dev-server signing keys never replace ours", async () => {
    const t = await endedThread("dev-mode");
    // @upstash/qstash's published local dev-server key, which the Receiver would use in dev mode.
    const devKey = { secret: "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r" };
    const previous = process.env.QSTASH_DEV;
    process.env.QSTASH_DEV = "true";
    try {
      expect((await qstash.deliver(t.message, toApp, { key: devKey })).status).toBe(401);
      expect((await qstash.deliver(t.message, toApp)).status).toBe(200);
    } finally {
      if (previous === undefined) delete process.env.QSTASH_DEV;
      else process.env.QSTASH_DEV = previous;
    }
  });

  it("answers 401 when callbacks are not configured (no signing keys), even to a valid signature", async () => {
    const body = JSON.stringify({ key: "episode:epi_unknown" });
    const res = await unconfigured.app.request(CALLBACK_URL, {
      method: "POST",
      headers: { "content-type": "application/json", "upstash-signature": qstash.sign({ url: CALLBACK_URL, body }) },
      body,
    });
    expect(res.status).toBe(401);
    expect(await json(res)).toEqual({ error: "Job callbacks are not configured" });
  });

  it("runs a duplicated delivery once: one summary call, one completed episode", async () => {
    const t = await endedThread("dave");
    const first = await json(await qstash.deliver(t.message, toApp));
    const again = await qstash.deliver(t.message, toApp);
    expect(again.status).toBe(200);
    expect([first.ran, (await json(again)).ran]).toEqual([true, false]);
    expect(summaryCalls("dave")).toBe(1);
    const list = await json(await svc.request("/v1/memory/episodic/datasets/jobs/episodes", { token: t.key }));
    expect(list.episodes.map((e: { episodeId: string }) => e.episodeId)).toEqual([t.episodeId]);
  });

  it("runs concurrent duplicate deliveries once", async () => {
    const t = await endedThread("erin");
    provider.latencyMs = 100;
    let results: Response[];
    try {
      results = await Promise.all([1, 2, 3].map(() => qstash.deliver(t.message, toApp)));
    } finally {
      provider.latencyMs = 0;
    }
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const ran = await Promise.all(results.map(async (r) => (await json(r)).ran));
    expect(ran.filter(Boolean)).toHaveLength(1);
    expect(summaryCalls("erin")).toBe(1);
    const list = await json(await svc.request("/v1/memory/episodic/datasets/jobs/episodes", { token: t.key }));
    expect(list.episodes.map((e: { episodeId: string; status: string }) => [e.episodeId, e.status])).toEqual([
      [t.episodeId, "completed"],
    ]);
  });

  it("answers 200 ran:false to a signed delivery for an unknown job, a job not yet due, or no key", async () => {
    const unknown = await signedDelivery(JSON.stringify({ key: "episode:epi_doesnotexist" }));
    expect(unknown.status).toBe(200);
    expect(await json(unknown)).toEqual({ ran: false, key: "episode:epi_doesnotexist" });
    const noKey = await signedDelivery(JSON.stringify({ hello: "world" }));
    expect(noKey.status).toBe(200);
    expect((await json(noKey)).ran).toBe(false);
    const notJson = await signedDelivery("not json");
    expect(notJson.status).toBe(200);
    expect((await json(notJson)).ran).toBe(false);

    // The idle timer published with the first message is due in 30 minutes: an early delivery is a no-op.
    const t = await endedThread("frank");
    const idle = qstash.messages.find((m) => JSON.parse(m.body).key === `idle:${t.threadId}`) as PublishedMessage;
    expect(idle.notBefore).toBeGreaterThan(Date.now() / 1000 + 29 * 60);
    expect(await json(await qstash.deliver(idle, toApp))).toEqual({ ran: false, key: `idle:${t.threadId}` });
  });

  it("waits for a job a delivery came up to 5 s early for, then runs it; one due later stays ran:false", async () => {
    const tenant = await newTenant("early");
    // An idle timer of a thread that is gone: its run only finds that out and ends the job.
    const schedule = (key: string, inMs: number) =>
      scheduleJob(
        svc.deps.db,
        {
          kind: "thread-idle",
          key,
          projectId: tenant.projectId,
          dataset: "jobs",
          runAt: new Date(Date.now() + inMs),
          payload: { threadId: key.slice("idle:".length) },
        },
        "replace",
        new Date(),
      );
    const deliver = (key: string) => signedDelivery(JSON.stringify({ key }));
    const remaining = async (key: string) =>
      rowsOf(await svc.deps.db.execute(sql`SELECT 1 FROM jobs WHERE key = ${key}`)).length;

    const soon = await schedule("idle:thr_gone_soon", 1_500);
    expect(await json(await deliver("idle:thr_gone_soon"))).toEqual({ ran: true, key: "idle:thr_gone_soon" });
    // Run once it was due, not before (had it waited for a job due later, that one would have run too).
    expect(Date.now()).toBeGreaterThanOrEqual(soon?.runAt.getTime() as number);
    expect(await remaining("idle:thr_gone_soon")).toBe(0);

    await schedule("idle:thr_gone_later", EARLY_DELIVERY_WAIT_MS + 10_000);
    expect(await json(await deliver("idle:thr_gone_later"))).toEqual({ ran: false, key: "idle:thr_gone_later" });
    expect(await remaining("idle:thr_gone_later")).toBe(1);
  });
});

describe("the QStash doorbell", () => {
  const doorbell = (token = qstash.token) =>
    qstashDoorbell({ token, baseUrl: qstash.url, callbackUrl: CALLBACK_URL, clock: systemClock });

  it("publishes one message per run: destination, body {key}, not-before, dedup id and retries", async () => {
    const due = { key: `episode:epi_due${Date.now()}`, runAt: new Date(Date.now() - 1_000) };
    const later = { key: `idle:thr_later${Date.now()}`, runAt: new Date(Date.now() + 10 * 60_000 + 123) };
    const before = qstash.messages.length;
    await doorbell().ring([due, later]);
    // The same runs rung again (a retry, two requests racing): deduplicated by QStash.
    await doorbell().ring([due, later]);
    const published = qstash.messages.slice(before);
    expect(published).toHaveLength(2);
    const [dueMessage, laterMessage] = [due, later].map((job) =>
      published.find((m) => JSON.parse(m.body).key === job.key),
    ) as PublishedMessage[];
    expect(dueMessage).toMatchObject({
      destination: CALLBACK_URL,
      method: "POST",
      contentType: "application/json",
      body: JSON.stringify({ key: due.key }),
      notBefore: undefined, // already due: delivered at once
      deduplicationId: deduplicationIdFor(due),
      retries: 3,
    });
    expect(laterMessage).toMatchObject({
      destination: CALLBACK_URL,
      body: JSON.stringify({ key: later.key }),
      notBefore: Math.ceil(later.runAt.getTime() / 1000), // unix seconds, never before run_at
      deduplicationId: deduplicationIdFor(later),
    });
    expect(deduplicationIdFor(later)).toMatch(/^[A-Za-z0-9_.-]+$/);
    expect(jobCallbackUrl(`${PUBLIC_BASE_URL}/`)).toBe(CALLBACK_URL);
    const statuses = qstash.calls.filter((c) => c.headers["upstash-deduplication-id"] === deduplicationIdFor(due));
    expect(statuses.map((c) => c.status)).toEqual([201, 202]);
    // A rescheduled run (a new run_at) is a new message.
    await doorbell().ring([{ key: later.key, runAt: new Date(later.runAt.getTime() + 60_000) }]);
    expect(qstash.messages.slice(before)).toHaveLength(3);
    // So is the same run rung again after a worker released it (armed again while it ran): the
    // first ring's delivery found it held, and a duplicate would be dropped.
    const released = { ...due, releasedAt: new Date() };
    await doorbell().ring([released]);
    expect(qstash.messages.slice(before)).toHaveLength(4);
    expect(deduplicationIdFor(released)).not.toBe(deduplicationIdFor(due));
  });

  it("rings no job due beyond QStash's shortest maximum delay (7 days): the sweep runs it", async () => {
    const now = Date.now();
    const week = { key: `idle:thr_week${now}`, runAt: new Date(now + QSTASH_MAX_DELAY_MS - 60_000) };
    const century = { key: `idle:thr_century${now}`, runAt: new Date(now + 100 * 365 * 86_400_000) };
    const before = qstash.messages.length;
    await doorbell().ring([week, century]);
    expect(qstash.messages.slice(before).map((m) => JSON.parse(m.body).key)).toEqual([week.key]);
  });

  it("fails the ring (not silently) when QStash rejects the token", async () => {
    const before = qstash.messages.length;
    await expect(doorbell("wrong-token").ring([{ key: "episode:epi_x", runAt: new Date() }])).rejects.toThrow();
    expect(qstash.calls.at(-1)?.status).toBe(401);
    expect(qstash.messages.length).toBe(before);
  });

  it("a failed publish is logged, the user's request still succeeds, and the sweep runs the job", async () => {
    // Every publish of the test fails: the message's ring (its idle timer and its thread's
    // message-embed job, one publish each, one warning), then the episode's ring.
    qstash.fail({ status: 500, times: 3 });
    const tenant = await newTenant("jobs-outage");
    const created = await json(await svc.request("/v1/threads", { token: tenant.key, json: { dataset: "jobs" } }));
    const added = await svc.request(`/v1/memory/working/threads/${created.threadId}/messages`, {
      token: tenant.key,
      json: { role: "user", content: "grace likes oolong" },
    });
    expect(added.status).toBe(201);
    const ended = await svc.request(`/v1/threads/${created.threadId}/end`, { method: "POST", token: tenant.key });
    expect(ended.status).toBe(200);
    const { episodeId } = await json(ended);
    await svc.settle();
    const failed = svc.logs.filter((l) => l.message === "doorbell failed; the sweep will run the job");
    expect(failed).toHaveLength(2);
    expect(failed.every((l) => l.level === "warn" && /500/.test(String(l.fields?.error)))).toBe(true);
    const ours = [`idle:${created.threadId}`, `embed:${created.threadId}`, `episode:${episodeId}`];
    expect(qstash.messages.filter((m) => ours.some((key) => m.body.includes(key)))).toEqual([]);
    expect((await episode(tenant.key, episodeId)).status).toBe("pending");

    await svc.runSweep();
    expect((await episode(tenant.key, episodeId)).status).toBe("completed");
    expect(summaryCalls("grace")).toBe(1);
  });
});

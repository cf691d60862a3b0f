import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TRACE_EXPORT_GRACE_MS } from "../../functions/observe";
import { memoryOperationOf, routeParams } from "../../functions/observe/memory-operations";
import { jsonOf, rowsOf } from "../../lib/db/rows";
import { runDueJobs } from "../../lib/jobs/runner";
import pkg from "../../package.json";
import { type FakeOpenAI, reportedUsage, startFakeOpenAI } from "../helpers/fake-openai";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../helpers/otlp-receiver";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Issue 36, traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, the Node.js host exports spans over
 * OTLP/HTTP to a receiver (here one in the test process): a span per request (the caller's
 * `traceparent` its parent), per memory operation, per statement group, per job (the request
 * that scheduled it its ancestor) and per model call, with the GenAI conventions' attributes.
 */

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const traceparent = (traceId: string) => `00-${traceId}-${CALLER_SPAN}-01`;

const SERVER = 2;
const CLIENT = 3;
const CONSUMER = 5;

let receiver: OtlpReceiver;
let fake: FakeOpenAI;

beforeAll(async () => {
  [receiver, fake] = await Promise.all([startOtlpReceiver(), startFakeOpenAI()]);
  fake.onStructured("episode_summary", () => ({ summary: "They moved to Porto", keyLearnings: [] }));
  fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
});
afterAll(async () => {
  await Promise.all([receiver.close(), fake.close()]);
});

/** The span's ancestors, nearest first, as far as the received spans go. */
function ancestors(span: ReceivedSpan, all: ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(all.map((s) => [s.spanId, s]));
  const chain: ReceivedSpan[] = [];
  for (let p = span.parentSpanId && byId.get(span.parentSpanId); p; p = p.parentSpanId && byId.get(p.parentSpanId)) {
    chain.push(p);
  }
  return chain;
}

describe("OTLP over HTTP as JSON", () => {
  let svc: TestService;
  beforeAll(async () => {
    // As when node starts the server without npm: npm's npm_package_version is not there.
    delete process.env.npm_package_version;
    svc = await createTestService({
      provider: fake,
      manualTime: true,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "memory-test",
      },
    });
  });
  afterAll(() => svc.close());

  /** Spans exported so far, of one trace. */
  async function trace(traceId: string) {
    await svc.observability?.flush();
    return receiver.spans().filter((s) => s.traceId === traceId);
  }

  async function newThread(key: string) {
    const res = await svc.request("/v1/threads", { method: "POST", token: key, json: { dataset: "ds" } });
    return ((await res.json()) as { threadId: string }).threadId;
  }

  it("a request's span continues the caller's trace; its memory operation and statements are its children", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const res = await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
      method: "POST",
      token: t.key,
      headers: { traceparent: traceparent(TRACE_ID) },
      json: { role: "user", content: "I am planning a trip to Lisbon in May" },
    });
    expect(res.status).toBe(201);

    const spans = await trace(TRACE_ID);
    const request = spans.find((s) => s.kind === SERVER);
    expect(request).toMatchObject({
      name: "POST /v1/memory/working/threads/:threadId/messages",
      parentSpanId: CALLER_SPAN,
      attributes: expect.objectContaining({
        "http.request.method": "POST",
        "http.route": "/v1/memory/working/threads/:threadId/messages",
        "http.response.status_code": 201,
      }),
      // package.json's version, though the process has no npm_package_version (deleted above).
      resource: expect.objectContaining({ "service.name": "memory-test", "service.version": pkg.version }),
    });
    const memory = spans.find((s) => s.name === "create_memory");
    expect(memory?.parentSpanId).toBe(request?.spanId);
    expect(memory?.attributes).toMatchObject({
      "gen_ai.operation.name": "create_memory",
      "gen_ai.conversation.id": threadId,
      "gen_ai.memory.store.id": t.projectId,
      "gen_ai.memory.record.count": 1,
    });
    const statements = spans.filter((s) => s.attributes["db.system.name"] === "postgresql");
    expect(statements.length).toBeGreaterThan(0);
    for (const statement of statements) {
      expect(statement.kind).toBe(CLIENT);
      expect(ancestors(statement, spans)).toContainEqual(request);
      expect(statement.attributes["db.query.text"]).toEqual(expect.any(String));
    }
  });

  it("a request without a traceparent starts a trace of its own", async () => {
    const res = await svc.request("/health");
    expect(res.status).toBe(200);
    await svc.observability?.flush();
    const health = receiver.spans().filter((s) => s.name === "GET /health");
    expect(health.length).toBeGreaterThan(0);
    expect(health.at(-1)?.parentSpanId).toBeUndefined();
  });

  it("the job a request scheduled runs in the request's trace, and its model calls in the job's span", async () => {
    const traceId = "5bf92f3577b34da6a3ce929d0e0e4737";
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    for (const content of ["We moved to Porto last spring", "Nice, how do you like it?"]) {
      await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role: content.startsWith("We") ? "user" : "assistant", content },
      });
    }
    const ended = await svc.request(`/v1/threads/${threadId}/end`, {
      method: "POST",
      token: t.key,
      headers: { traceparent: traceparent(traceId) },
    });
    expect(ended.status).toBe(200);
    await runDueJobs(svc.deps);

    const spans = await trace(traceId);
    const request = spans.find((s) => s.kind === SERVER && s.name === "POST /v1/threads/:id/end");
    const job = spans.find((s) => s.name === "job episode");
    expect(request).toBeDefined();
    expect(job).toMatchObject({ kind: CONSUMER, attributes: expect.objectContaining({ "job.kind": "episode" }) });
    // Parent and child: the job's span descends from the request that scheduled it.
    expect(ancestors(job as ReceivedSpan, spans)).toContainEqual(request);

    const summary = spans.find((s) => s.attributes["memory.model_call.kind"] === "episode_summary");
    expect(summary).toMatchObject({
      name: "chat gpt-4o-mini",
      kind: CLIENT,
      attributes: expect.objectContaining({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.output.type": "json",
        "gen_ai.usage.input_tokens": reportedUsage(fake, "episode_summary").prompt_tokens,
        "gen_ai.usage.output_tokens": reportedUsage(fake, "episode_summary").completion_tokens,
        "server.address": "127.0.0.1",
      }),
    });
    expect(ancestors(summary as ReceivedSpan, spans)).toContainEqual(job);
    const embedding = spans.find(
      (s) =>
        s.attributes["gen_ai.operation.name"] === "embeddings" && ancestors(s, spans).includes(job as ReceivedSpan),
    );
    expect(embedding?.name).toBe("embeddings text-embedding-3-small");
    expect(embedding?.attributes["gen_ai.usage.input_tokens"]).toEqual(expect.any(Number));
  });

  it("a failed model call is a failed span with its error type", async () => {
    const traceId = "6bf92f3577b34da6a3ce929d0e0e4738";
    const t = await newTenant(svc);
    fake.fail({ status: 503, times: 1, endpoint: "embeddings" });
    try {
      const res = await svc.request("/v1/memory/recall", {
        method: "POST",
        token: t.key,
        headers: { traceparent: traceparent(traceId) },
        json: { dataset: "ds", query: "where do they live now?" },
      });
      expect(res.status).toBe(200); // recall degrades to keyword search
    } finally {
      fake.clearFailures();
    }
    const spans = await trace(traceId);
    const call = spans.find((s) => s.attributes["gen_ai.operation.name"] === "embeddings");
    expect(call).toMatchObject({ statusCode: 2, attributes: expect.objectContaining({ "error.type": "503" }) });
    const search = spans.find((s) => s.name === "search_memory");
    expect(search?.attributes).toMatchObject({
      "gen_ai.operation.name": "search_memory",
      "gen_ai.memory.record.count": 0,
      "gen_ai.memory.store.id": t.projectId,
    });
  });
});

describe("OTLP over HTTP as protobuf (the default protocol)", () => {
  it("exports to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as application/x-protobuf", async () => {
    const svc = await createTestService({
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/custom/traces` },
    });
    try {
      await svc.request("/health");
      await svc.observability?.flush();
    } finally {
      await svc.close();
    }
    expect(receiver.requests).toContainEqual(
      expect.objectContaining({ path: "/custom/traces", contentType: "application/x-protobuf" }),
    );
  });
});

describe("a collector that is down costs only its traces", () => {
  /** A port nothing listens on (refused), or a server that takes the request and never answers. */
  async function collector(mode: "refused" | "hanging") {
    const server = createServer(() => {});
    const sockets = new Set<Socket>();
    server.on("connection", (s) => sockets.add(s));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const close = async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    };
    if (mode === "refused") await close();
    return { url: `http://127.0.0.1:${port}`, close };
  }

  for (const mode of ["refused", "hanging"] as const) {
    it(`requests answer, and shutting down closes the database, with the collector ${mode}`, async () => {
      const down = await collector(mode);
      const svc = await createTestService({
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: down.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" },
      });
      const database = svc.deps.database as { close: () => Promise<void> };
      const closeDatabase = database.close.bind(database);
      let databaseClosed = false;
      database.close = async () => {
        databaseClosed = true;
        await closeDatabase();
      };
      try {
        const t = await newTenant(svc);
        const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } });
        expect(res.status).toBe(201);
        const started = performance.now();
        await expect(svc.close()).resolves.toBeUndefined();
        expect(databaseClosed).toBe(true);
        // The exporter's own timeout is 10 s; the shutdown waits TRACE_EXPORT_GRACE_MS for it.
        expect(performance.now() - started).toBeLessThan(TRACE_EXPORT_GRACE_MS + 5_000);
      } finally {
        if (!databaseClosed) await closeDatabase();
        await down.close();
      }
    }, 30_000);
  }
});

describe("without OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  it("exports nothing, and a job row carries no trace context", async () => {
    const svc = await createTestService({ manualTime: true });
    try {
      expect(svc.observability).toBeUndefined();
      const before = receiver.requests.length;
      const t = await newTenant(svc);
      const created = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } });
      const { threadId } = (await created.json()) as { threadId: string };
      await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
        method: "POST",
        token: t.key,
        headers: { traceparent: traceparent(TRACE_ID) },
        json: { role: "user", content: "hello" },
      });
      const [row] = rowsOf<{ payload: Record<string, unknown> | string }>(
        await svc.deps.db.execute(sql`SELECT payload FROM jobs WHERE key = ${`idle:${threadId}`}`),
      );
      expect(jsonOf(row.payload)).toEqual({ threadId });
      expect(receiver.requests.length).toBe(before);
    } finally {
      await svc.close();
    }
  });
});

describe("memory operations by route", () => {
  it("read a route's parameters from its path, and map /v1 routes to GenAI memory operations", () => {
    expect(
      routeParams("/v1/memory/working/threads/:threadId/messages", "/v1/memory/working/threads/thr_%C3%A9/messages"),
    ).toEqual({ threadId: "thr_é" });
    expect(routeParams("/v1/threads/:id", "/v1/threads/a/b")).toEqual({});
    expect(memoryOperationOf("POST", "/v1/memory/recall")?.name).toBe("search_memory");
    expect(memoryOperationOf("DELETE", "/v1/memory/semantic/datasets/:dataset/facts/:factId")).toEqual({
      name: "delete_memory",
      recordParam: "factId",
      recordCount: 1,
    });
    expect(memoryOperationOf("POST", "/v1/threads")).toBeUndefined();
    expect(memoryOperationOf("GET", null)).toBeUndefined();
  });
});

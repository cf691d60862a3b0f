import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { parseConfig } from "../../lib/config";
import { HttpError, ProviderError } from "../../lib/errors";
import { createLogger, errorFields, type LogLevel } from "../../lib/log";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { startServerProcess } from "../helpers/process";
import { adminSession, createTestService, newTenant } from "../helpers/service";
import { migratedPgliteEnv } from "../helpers/test-database";

/**
 * The request log: one `request` line per request at info, on the real stack, read back through
 * the same JSON line a host writes (the logger's sink is captured). Then LOG_LEVEL, and stack traces
 * only for what nobody expected.
 */
interface Line {
  level: LogLevel;
  message: string;
  time: string;
  [field: string]: unknown;
}

const lines: Line[] = [];
const capture = createLogger({ level: "debug", sink: (_level, line) => lines.push(JSON.parse(line)) });

/** Statements throw while this is set (an unexpected failure at the driver, before the statement is sent). */
let failQueries = false;
const svc = await createTestService({
  log: capture,
  onQuery: () => {
    if (failQueries) throw new Error("injected database failure");
  },
});
const tenant = await newTenant(svc, "request-log");

afterAll(() => svc.close());
beforeEach(() => {
  lines.length = 0;
  failQueries = false;
});

const requestLines = () => lines.filter((l) => l.message === "request");
const withStack = () => lines.filter((l) => "stack" in l);

describe("one request line per request", () => {
  it("has method, route template, status, duration and project, at info, and nothing of the message or key", async () => {
    const content = "my door code is 4711, please remember it";
    const created = await svc.request("/v1/threads", { method: "POST", token: tenant.key, json: { dataset: "logs" } });
    expect(created.status).toBe(201);
    const { threadId } = (await created.json()) as { threadId: string };
    const added = await svc.request(`/v1/memory/working/threads/${threadId}/messages?role=user`, {
      method: "POST",
      token: tenant.key,
      json: { role: "user", content },
    });
    expect(added.status).toBe(201);

    expect(lines).toHaveLength(2); // nothing else is logged for these two requests
    const [create, add] = requestLines();
    expect(create).toEqual({
      level: "info",
      message: "request",
      method: "POST",
      route: "/v1/threads",
      status: 201,
      durationMs: expect.any(Number),
      projectId: tenant.projectId,
      time: expect.any(String),
    });
    expect(create.durationMs).toBeGreaterThanOrEqual(0);
    expect(add).toMatchObject({
      level: "info",
      method: "POST",
      route: "/v1/memory/working/threads/:threadId/messages",
      status: 201,
      projectId: tenant.projectId,
    });
    const text = JSON.stringify(lines);
    expect(text).not.toContain(threadId); // the template, not the id
    expect(text).not.toContain("4711"); // never the content
    expect(text).not.toContain("role=user"); // never the query string
    expect(text).not.toContain(tenant.key); // never the credential
  });

  it("names the user of a dashboard session, and never the session token", async () => {
    const session = await adminSession(svc);
    lines.length = 0;
    const res = await svc.request(`/dashboard/projects/${tenant.projectId}`, { token: session });
    expect(res.status).toBe(200);
    expect(requestLines()).toEqual([
      expect.objectContaining({
        method: "GET",
        route: "/dashboard/projects/:id",
        status: 200,
        userId: expect.any(String),
      }),
    ]);
    expect(JSON.stringify(lines)).not.toContain(session);
    expect(JSON.stringify(lines)).not.toContain(tenant.projectId);
  });

  it("logs what never reaches a handler: an unknown route (its path, no route), a redirect, a refused credential", async () => {
    expect((await svc.request("/no/such/route")).status).toBe(404);
    expect((await svc.request("/")).status).toBe(302);
    expect((await svc.request("/v1/threads", { method: "POST", token: "mk_wrong", json: {} })).status).toBe(401);
    expect(requestLines()).toEqual([
      expect.objectContaining({ method: "GET", route: null, path: "/no/such/route", status: 404 }),
      expect.objectContaining({ method: "GET", route: "/", status: 302 }),
      expect.objectContaining({ method: "POST", route: "/v1/threads", status: 401 }),
    ]);
    expect(requestLines()[2]).not.toHaveProperty("projectId");
    expect(JSON.stringify(lines)).not.toContain("mk_wrong");
  });
});

describe("stack traces only for the unexpected", () => {
  it("a 4xx logs its request line and no stack", async () => {
    const missing = await svc.request("/v1/threads/thr_missing", { token: tenant.key });
    expect(missing.status).toBe(404);
    const invalid = await svc.request("/v1/threads", { method: "POST", token: tenant.key, json: { dataset: 7 } });
    expect(invalid.status).toBe(400);
    expect(requestLines().map((l) => [l.route, l.status])).toEqual([
      ["/v1/threads/:id", 404],
      ["/v1/threads", 400],
    ]);
    expect(lines).toHaveLength(2);
    expect(withStack()).toEqual([]);
  });

  it("an unexpected 500 logs one stack (onError's line) besides its request line", async () => {
    failQueries = true;
    const res = await svc.request("/v1/threads", { method: "POST", token: tenant.key, json: { dataset: "logs" } });
    failQueries = false;
    expect(res.status).toBe(500);
    expect(withStack()).toEqual([
      expect.objectContaining({ level: "error", message: "unhandled error", error: expect.any(String) }),
    ]);
    expect(withStack()[0].stack).toContain("injected database failure");
    expect(requestLines()).toEqual([expect.objectContaining({ route: "/v1/threads", status: 500 })]);
    expect(requestLines()[0]).not.toHaveProperty("stack");
  });

  it("a chat whose model call fails logs a warning naming the provider, not an unhandled error", async () => {
    const fake = await startFakeOpenAI();
    const withProvider = await createTestService({ log: capture, provider: fake });
    try {
      const t = await newTenant(withProvider, "request-log-provider");
      const thread = await withProvider.request("/v1/threads", {
        method: "POST",
        token: t.key,
        json: { dataset: "d" },
      });
      const { threadId } = (await thread.json()) as { threadId: string };
      fake.fail({ status: 400, times: 1, endpoint: "chat" });
      lines.length = 0;
      const res = await withProvider.request(`/v1/memory/working/threads/${threadId}/chat`, {
        method: "POST",
        token: t.key,
        json: { content: "hello", recall: false },
      });
      expect(res.status).toBe(500);
      expect(lines.filter((l) => l.level === "error")).toEqual([]);
      expect(lines).toContainEqual(
        expect.objectContaining({ level: "warn", message: "request failed: the model call failed" }),
      );
    } finally {
      await withProvider.close();
      await fake.close();
    }
  });

  it("errorFields keeps the stack of an unknown error, not of a client error or a provider failure", () => {
    expect(errorFields(new Error("bug"))).toEqual({ error: "bug", stack: expect.stringContaining("bug") });
    expect(errorFields(new HttpError(404, "Thread not found"))).toEqual({ error: "Thread not found" });
    expect(errorFields(new HttpError(500, "broken"))).toHaveProperty("stack");
    expect(errorFields(new ProviderError("Model call failed: 429"))).toEqual({ error: "Model call failed: 429" });
    expect(errorFields("a string")).toEqual({ error: "a string" });
  });
});

describe("LOG_LEVEL", () => {
  it("writes its level and the more severe ones only", () => {
    const seen = (level: LogLevel) => {
      const out: string[] = [];
      const log = createLogger({ level, sink: (l) => out.push(l) });
      log.debug("d");
      log.info("i");
      log.warn("w");
      log.error("e");
      return out;
    };
    expect(seen("error")).toEqual(["error"]);
    expect(seen("warn")).toEqual(["warn", "error"]);
    expect(seen("info")).toEqual(["info", "warn", "error"]);
    expect(seen("debug")).toEqual(["debug", "info", "warn", "error"]);
  });

  it("is read from the environment: info by default, any case, anything else refused", () => {
    expect(parseConfig({}).logLevel).toBe("info");
    expect(parseConfig({ LOG_LEVEL: "" }).logLevel).toBe("info");
    expect(parseConfig({ LOG_LEVEL: " WARN " }).logLevel).toBe("warn");
    expect(parseConfig({ LOG_LEVEL: "debug" }).logLevel).toBe("debug");
    expect(() => parseConfig({ LOG_LEVEL: "verbose" })).toThrow();
  });

  it("filters the request lines of `npm start` (the Node.js host's own wiring)", async () => {
    const data = mkdtempSync(join(tmpdir(), "memsvc-request-log-"));
    onTestFinished(() => rmSync(data, { recursive: true, force: true }));
    const requestLineAt = async (level: LogLevel) => {
      const server = await startServerProcess({
        ...migratedPgliteEnv(join(data, level)),
        ADMIN_PASSWORD: "request-log-admin",
        LOG_LEVEL: level,
      });
      try {
        expect((await fetch(`${server.url}/health`)).status).toBe(200);
        await new Promise((r) => setTimeout(r, 200)); // the line is written after the response
        return server
          .output()
          .split("\n")
          .find((l) => l.includes('"message":"request"'));
      } finally {
        server.child.kill("SIGTERM");
        await server.exited;
      }
    };
    const [info, warn] = await Promise.all([requestLineAt("info"), requestLineAt("warn")]);
    expect(JSON.parse(info ?? "null")).toMatchObject({ level: "info", method: "GET", route: "/health", status: 200 });
    expect(warn).toBeUndefined();
  }, 120_000);
});

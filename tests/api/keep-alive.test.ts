import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { MAX_BODY_BYTES } from "../../functions/app";
import { createNodeServer } from "../../functions/node-host";
import { parseConfig } from "../../lib/config";
import { startServerProcess } from "../helpers/process";
import { createTestService, newTenant } from "../helpers/service";
import { migratedPgliteEnv } from "../helpers/test-database";

/**
 * The Node.js host over real sockets: a request answered before its body was read (a 401, a 413
 * from its declared length, a 404) must not leave a broken keep-alive connection behind. Before
 * the fix, a client's next request on such a pooled connection failed with a reset
 * (UND_ERR_SOCKET in Node's fetch) once the unread body was larger than the socket buffers.
 */
const svc = await createTestService();
const tenant = await newTenant(svc, "keep-alive");

async function listen(server: Server) {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

const server = createNodeServer({ fetch: svc.app.fetch, keepAliveTimeoutMs: 65_000, headersTimeoutMs: 66_000 });
/** Connections the server accepted, to tell a reused connection from a new one. */
let accepted = 0;
server.on("connection", () => accepted++);
const url = await listen(server);

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await svc.close();
});

const KB = 1024;
const body = (bytes: number) => JSON.stringify({ dataset: "x".repeat(bytes) });

interface Answer {
  status: number;
  connection: string | null;
  body: string;
}

/** Node's fetch (undici) with its one global pool: every request must get its answer. */
async function send(path: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url + path, init);
  return { status: res.status, connection: res.headers.get("connection"), body: await res.text() };
}

const post = (path: string, bytes: number, token: string) =>
  send(path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body(bytes),
  });

/** Three small requests on the same client after each large one (the second used to be reset). */
async function smallRequests() {
  for (let i = 0; i < 3; i++) {
    expect(await send("/health")).toMatchObject({ status: 200, connection: "keep-alive" });
    expect(await send("/v1/threads/thr_missing", { headers: { authorization: `Bearer ${tenant.key}` } })).toMatchObject(
      {
        status: 404,
      },
    );
  }
}

describe("Node's fetch on one client", () => {
  it("gets every answer after a 401 with a 512 KB body, and the connection stays open", async () => {
    for (let round = 0; round < 3; round++) {
      expect(await post("/v1/threads", 512 * KB, "wrong")).toEqual({
        status: 401,
        connection: "keep-alive",
        body: JSON.stringify({ error: "Invalid API key" }),
      });
      await smallRequests();
    }
    // Drained, not closed: the client kept its connections.
    expect(accepted).toBeLessThanOrEqual(3);
  });

  it("gets every answer after a 401 with a body just within the body limit", async () => {
    for (let round = 0; round < 2; round++) {
      const res = await post("/v1/memory/recall", MAX_BODY_BYTES - 20, "also-wrong");
      expect(res).toMatchObject({ status: 401, connection: "keep-alive" });
      await smallRequests();
    }
  });

  it("gets every answer after a route that takes no body answered one it never read", async () => {
    // Authenticated, so the body limit has opened the body's stream; the route never reads it.
    for (let round = 0; round < 3; round++) {
      expect(await post("/v1/threads/thr_missing/end", 512 * KB, tenant.key)).toEqual({
        status: 404,
        connection: "keep-alive",
        body: JSON.stringify({ error: "Thread not found" }),
      });
      await smallRequests();
    }
  });

  it("gets every answer after a 413 with a 1.5 MB body: that connection is closed", async () => {
    for (let round = 0; round < 3; round++) {
      expect(await post("/v1/threads", 1536 * KB, tenant.key)).toEqual({
        status: 413,
        connection: "close",
        body: JSON.stringify({ error: "Request body too large (limit 1 MB)" }),
      });
      await smallRequests();
    }
  });

  it("gets every answer after a 401 with a 1.5 MB body", async () => {
    for (let round = 0; round < 3; round++) {
      expect(await post("/v1/threads", 1536 * KB, "wrong")).toMatchObject({ status: 401, connection: "close" });
      await smallRequests();
    }
  });

  it("gets every answer after a 404 for an unknown route with a large body", async () => {
    for (const bytes of [512 * KB, 1536 * KB, 4096 * KB]) {
      const res = await post("/v1/nowhere", bytes, tenant.key);
      expect(res).toMatchObject({ status: 404, connection: bytes <= MAX_BODY_BYTES ? "keep-alive" : "close" });
      await smallRequests();
    }
  });

  it("gets every answer after a chunked body the route never reads", async () => {
    for (let round = 0; round < 2; round++) {
      const chunks = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 8; i++) controller.enqueue(new Uint8Array(128 * KB).fill(120));
          controller.close();
        },
      });
      const res = await send("/v1/threads", {
        method: "POST",
        headers: { authorization: "Bearer wrong", "content-type": "application/json" },
        body: chunks,
        duplex: "half",
      } as RequestInit);
      // No declared length: the connection cannot be kept for a body of unknown size.
      expect(res).toMatchObject({ status: 401, connection: "close" });
      await smallRequests();
    }
  });

  it("mixes all of them with concurrent small requests", async () => {
    const big = [
      post("/v1/threads", 512 * KB, "wrong"),
      post("/v1/threads", 1536 * KB, tenant.key),
      post("/v1/nowhere", 700 * KB, "wrong"),
      post("/dashboard/projects", 900 * KB, "wrong"),
    ];
    const small = Array.from({ length: 20 }, () => send("/health"));
    const answers = await Promise.all([...big, ...small]);
    expect(answers.map((a) => a.status)).toEqual([401, 413, 404, 401, ...Array(20).fill(200)]);
    await smallRequests();
  });
});

// --- The same on one raw connection, byte for byte --------------------------------------------------

/** One TCP connection; `request` writes a request and resolves with the next whole response. */
function rawConnection(to = url) {
  const socket: Socket = connect(Number(new URL(to).port), "127.0.0.1");
  let buffer = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  let closed = false;
  socket.on("data", (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    waiting?.();
  });
  socket.on("close", () => {
    closed = true;
    waiting?.();
  });
  socket.on("error", () => {});
  const nextResponse = async (): Promise<{ head: string; body: string } | null> => {
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end >= 0) {
        const head = buffer.subarray(0, end).toString("latin1");
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length >= end + 4 + length) {
          const body = buffer.subarray(end + 4, end + 4 + length).toString();
          buffer = buffer.subarray(end + 4 + length);
          return { head, body };
        }
      }
      if (closed) return null;
      await new Promise<void>((resolve) => {
        waiting = resolve;
      });
    }
  };
  return {
    request(head: string, payload: Buffer = Buffer.alloc(0)) {
      socket.write(Buffer.concat([Buffer.from(head, "latin1"), payload]));
      return nextResponse();
    },
    isClosed: () => closed,
    close: () => socket.destroy(),
  };
}

const requestHead = (method: string, path: string, headers: Record<string, string>) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("")}\r\n`;

describe("one raw keep-alive connection", () => {
  it("answers the next request on the same connection after a 401 with an unread 512 KB body", async () => {
    const conn = rawConnection();
    try {
      for (let round = 0; round < 3; round++) {
        const payload = Buffer.from(body(512 * KB));
        const denied = await conn.request(
          requestHead("POST", "/v1/threads", {
            authorization: "Bearer abc def",
            "content-type": "application/json",
            "content-length": String(payload.length),
          }),
          payload,
        );
        expect(denied?.head).toMatch(/^HTTP\/1\.1 401 /);
        expect(denied?.head).toMatch(/\r\nConnection: keep-alive/i);
        expect(denied?.head).toMatch(/\r\nKeep-Alive: timeout=65/i);
        expect(denied?.body).toBe(JSON.stringify({ error: "Invalid API key" }));
        const health = await conn.request(requestHead("GET", "/health", {}));
        expect(health?.head).toMatch(/^HTTP\/1\.1 200 /);
      }
      expect(conn.isClosed()).toBe(false);
    } finally {
      conn.close();
    }
  });

  it("answers what Node's parser refuses (a 20 KB URL, a request that is not HTTP) with an {error} body", async () => {
    const long = rawConnection();
    try {
      const answer = await long.request(requestHead("GET", `/v1/threads/${"x".repeat(20 * KB)}`, {}));
      expect(answer?.head).toMatch(/^HTTP\/1\.1 431 /);
      expect(answer?.head).toMatch(/\r\nContent-Type: application\/json/i);
      expect(JSON.parse(answer?.body ?? "")).toEqual({
        error: "Request headers too large (limit 16 KB, the URL included)",
      });
    } finally {
      long.close();
    }
    const garbage = rawConnection();
    try {
      const answer = await garbage.request("NOT HTTP AT ALL\r\n\r\n");
      expect(answer?.head).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(answer?.body ?? "")).toEqual({ error: "Bad request: not a valid HTTP request" });
    } finally {
      garbage.close();
    }
  });

  it("says Connection: close and closes after a 413 for a declared 1.5 MB body", async () => {
    const conn = rawConnection();
    try {
      const payload = Buffer.from(body(1536 * KB));
      const tooLarge = await conn.request(
        requestHead("POST", "/v1/threads", {
          authorization: `Bearer ${tenant.key}`,
          "content-type": "application/json",
          "content-length": String(payload.length),
        }),
        payload,
      );
      expect(tooLarge?.head).toMatch(/^HTTP\/1\.1 413 /);
      expect(tooLarge?.head).toMatch(/\r\nConnection: close/i);
      // Nothing more is read on it: the client knew to open a new connection.
      expect(await conn.request(requestHead("GET", "/health", {}))).toBeNull();
    } finally {
      conn.close();
    }
  });

  it("closes a connection whose unread body stalls past the drain timeout", async () => {
    const quick = createNodeServer({
      fetch: svc.app.fetch,
      keepAliveTimeoutMs: 65_000,
      headersTimeoutMs: 66_000,
      drainTimeoutMs: 200,
    });
    const quickUrl = await listen(quick);
    const conn = rawConnection(quickUrl);
    try {
      // 100 KB of a declared 512 KB, then nothing: the 401 comes, the rest never does.
      const denied = await conn.request(
        requestHead("POST", "/v1/threads", { authorization: "Bearer x y", "content-length": String(512 * KB) }),
        Buffer.alloc(100 * KB, 120),
      );
      expect(denied?.head).toMatch(/^HTTP\/1\.1 401 /);
      const started = Date.now();
      while (!conn.isClosed() && Date.now() - started < 5_000) await new Promise((r) => setTimeout(r, 20));
      expect(conn.isClosed()).toBe(true);
    } finally {
      conn.close();
      quick.closeAllConnections();
      await new Promise((resolve) => quick.close(resolve));
    }
  });

  it("never lets a NUL in the Authorization header reach the service: Node's parser answers 400", async () => {
    const conn = rawConnection();
    try {
      const res = await conn.request(requestHead("GET", "/v1/threads/thr_x", { authorization: "Bearer a\u0000b" }));
      expect(res?.head).toMatch(/^HTTP\/1\.1 400 /);
    } finally {
      conn.close();
    }
  });
});

// --- Timeouts ------------------------------------------------------------------------------------

describe("the Node.js host's timeouts", () => {
  it("default above common proxies' 60 s idle timeout, headers one second after keep-alive", () => {
    expect(parseConfig({})).toMatchObject({ keepAliveTimeoutMs: 65_000, headersTimeoutMs: 66_000 });
    expect(parseConfig({ KEEP_ALIVE_TIMEOUT_MS: "620000" })).toMatchObject({
      keepAliveTimeoutMs: 620_000,
      headersTimeoutMs: 621_000,
    });
    expect(parseConfig({ KEEP_ALIVE_TIMEOUT_MS: "", HEADERS_TIMEOUT_MS: "" })).toMatchObject({
      keepAliveTimeoutMs: 65_000,
      headersTimeoutMs: 66_000,
    });
    expect(parseConfig({ KEEP_ALIVE_TIMEOUT_MS: "30000", HEADERS_TIMEOUT_MS: "40000" })).toMatchObject({
      keepAliveTimeoutMs: 30_000,
      headersTimeoutMs: 40_000,
    });
    for (const bad of [
      { KEEP_ALIVE_TIMEOUT_MS: "999" },
      { HEADERS_TIMEOUT_MS: "5s" },
      { KEEP_ALIVE_TIMEOUT_MS: "1.5e3x" },
    ]) {
      expect(() => parseConfig(bad), JSON.stringify(bad)).toThrow();
    }
  });

  it("are applied to the server (a headers timeout past Node's 300 s request timeout raises that too)", () => {
    const s = createNodeServer({ fetch: svc.app.fetch, keepAliveTimeoutMs: 620_000, headersTimeoutMs: 621_000 });
    expect({ keepAlive: s.keepAliveTimeout, headers: s.headersTimeout, request: s.requestTimeout }).toEqual({
      keepAlive: 620_000,
      headers: 621_000,
      request: 621_000,
    });
    const d = createNodeServer({ fetch: svc.app.fetch, keepAliveTimeoutMs: 65_000, headersTimeoutMs: 66_000 });
    expect(d.requestTimeout).toBe(300_000);
  });

  it("npm start's entry serves with them and keeps connections after unread bodies", { timeout: 90_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), "memsvc-keep-alive-"));
    onTestFinished(() => rmSync(data, { recursive: true, force: true }));
    const proc = await startServerProcess(
      {
        ...migratedPgliteEnv(join(data, "db")),
        ADMIN_PASSWORD: "keep-alive-admin",
        OPENAI_API_KEY: "",
        KEEP_ALIVE_TIMEOUT_MS: "70000",
      },
      60_000,
    );
    try {
      const health = await fetch(`${proc.url}/health`);
      expect(health.status).toBe(200);
      expect(health.headers.get("keep-alive")).toBe("timeout=70");
      await health.text();
      for (const [bytes, status] of [
        [512 * KB, 401],
        [1536 * KB, 401],
        [512 * KB, 404],
      ] as const) {
        const res = await fetch(`${proc.url}${status === 404 ? "/v1/nowhere" : "/v1/threads"}`, {
          method: "POST",
          headers: { authorization: "Bearer abc def", "content-type": "application/json" },
          body: body(bytes),
        });
        expect(res.status).toBe(status);
        await res.text();
        for (let i = 0; i < 3; i++) expect((await fetch(`${proc.url}/health`)).status).toBe(200);
      }
    } finally {
      proc.child.kill("SIGTERM");
      await proc.exited;
    }
  });
});

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../dev/start-command";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { callJson, provisionApiKey } from "../helpers/http-tenant";
import { freePort, startServerProcess } from "../helpers/process";
import { migratedPgliteEnv } from "../helpers/test-database";

/**
 * SIGTERM to `npm start`'s process: a request in flight is answered before the process exits
 * (the server stops taking connections, waits for it, then closes the database). Before, the
 * database closed under it and the process exited mid-request: the client saw its connection cut.
 */
const provider = await startFakeOpenAI();
afterAll(() => provider.close());
provider.onText(() => "A reply worth waiting for.");

const ADMIN_PASSWORD = "shutdown-suite-password";
const data = mkdtempSync(join(tmpdir(), "memsvc-shutdown-"));
afterAll(() => rmSync(data, { recursive: true, force: true }));
let databases = 0;
/** A data directory of the server's own, migrated already. */
const database = () => migratedPgliteEnv(join(data, `db-${++databases}`));
/** A server on the fake provider, logging at info (its "shutting down" line). */
const withProvider = () => ({
  ...database(),
  ADMIN_PASSWORD,
  OPENAI_BASE_URL: provider.url,
  OPENAI_API_KEY: "test-key",
  LOG_LEVEL: "info",
});

describe("SIGTERM", { timeout: 90_000 }, () => {
  it("answers the request in flight, then exits 0", async () => {
    const server = await startServerProcess(withProvider());
    try {
      const key = await provisionApiKey(server.url, ADMIN_PASSWORD, "shutdown");
      const thread = await callJson(server.url, "/v1/threads", { token: key, body: { dataset: "ds" } });
      const threadId = thread.body.threadId as string;
      provider.endpointLatencyMs.chat = 1_500;
      const chat = callJson(server.url, `/v1/memory/working/threads/${threadId}/chat`, {
        token: key,
        body: { content: "Say something, slowly.", recall: false },
      });
      await expect.poll(() => provider.inFlight, { timeout: 10_000, interval: 10 }).toBe(1);
      server.child.kill("SIGTERM");

      expect(await chat).toMatchObject({ status: 200, body: { reply: { content: "A reply worth waiting for." } } });
      expect(await server.exited).toBe(0);
      expect(server.output()).toContain("shutting down");
    } finally {
      if (server.child.exitCode === null) server.child.kill("SIGKILL");
    }
  });

  it("closes a busy keep-alive connection with its response, rather than serving it through the grace", async () => {
    const server = await startServerProcess(withProvider());
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const key = await provisionApiKey(server.url, ADMIN_PASSWORD, "keep-alive");
      const thread = await callJson(server.url, "/v1/threads", { token: key, body: { dataset: "ds" } });
      provider.endpointLatencyMs.chat = 1_500;
      const { port } = new URL(server.url);
      const chat = new Promise<{ status?: number; connection?: string }>((resolve, reject) => {
        const body = JSON.stringify({ content: "Say something, slowly.", recall: false });
        const req = request(
          {
            agent,
            host: "127.0.0.1",
            port,
            method: "POST",
            path: `/v1/memory/working/threads/${thread.body.threadId}/chat`,
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          },
          (res) => {
            res.resume();
            res.once("end", () => resolve({ status: res.statusCode, connection: res.headers.connection }));
          },
        );
        req.once("error", reject);
        req.end(body);
      });
      await expect.poll(() => provider.inFlight, { timeout: 10_000, interval: 10 }).toBe(1);
      server.child.kill("SIGTERM");
      expect(await chat).toEqual({ status: 200, connection: "close" });
      expect(await server.exited).toBe(0);
      // The connection went with its response: nothing was left for the grace to cut.
      expect(server.output()).not.toContain("requests still running");
    } finally {
      agent.destroy();
      provider.endpointLatencyMs.chat = 0;
      if (server.child.exitCode === null) server.child.kill("SIGKILL");
    }
  });

  it("says so when ADMIN_PASSWORD meets a database that has users already", async () => {
    const env = database();
    for (const [password, warned] of [
      [ADMIN_PASSWORD, false],
      ["another-password", true],
    ] as const) {
      const server = await startServerProcess({ ...env, ADMIN_PASSWORD: password });
      server.child.kill("SIGTERM");
      expect(await server.exited).toBe(0);
      expect(server.output().includes("ADMIN_PASSWORD is ignored"), server.output()).toBe(warned);
    }
  });

  it("a closed log pipe does not take the server down", async () => {
    const server = await startServerProcess({ ...database(), ADMIN_PASSWORD, LOG_LEVEL: "info" });
    try {
      // The reader of its stdout goes (`npm start | head -1`): every request's log line is an EPIPE.
      server.child.stdout?.destroy();
      for (let i = 0; i < 5; i++) expect((await fetch(`${server.url}/health`)).status).toBe(200);
      expect(server.child.exitCode).toBeNull();
    } finally {
      server.child.kill("SIGKILL");
    }
  });

  it("reaches the server through npm: SIGTERM to `npm start` stops it, and npm exits 0", async () => {
    // npm runs the script in a shell; without `exec` the shell died of the signal and left the
    // server running, orphaned, on its port and its data directory.
    const port = await freePort();
    const npm = spawn("npm", ["start"], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...database(), ADMIN_PASSWORD, PORT: String(port), LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    npm.stdout.on("data", (chunk) => {
      output += chunk;
    });
    npm.stderr.on("data", (chunk) => {
      output += chunk;
    });
    const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
    try {
      await expect
        .poll(() => output, { timeout: 60_000, interval: 50 })
        .toContain(`Listening on http://127.0.0.1:${port}`);
      npm.kill("SIGTERM");
      expect(await exited, output).toBe(0);
      expect(output).toContain('"message":"shutting down"');
      // Nothing listens on the port any more: the server went with npm.
      const refused = await new Promise<boolean>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        socket.once("connect", () => {
          socket.destroy();
          resolve(false);
        });
        socket.once("error", () => resolve(true));
      });
      expect(refused).toBe(true);
    } finally {
      if (npm.exitCode === null) npm.kill("SIGKILL");
    }
  });
});

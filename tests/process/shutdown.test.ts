import { afterAll, describe, expect, it } from "vitest";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { callJson, provisionApiKey } from "../helpers/http-tenant";
import { startServerProcess } from "../helpers/process";

/**
 * SIGTERM to `npm start`'s process: a request in flight is answered before the process exits
 * (the server stops taking connections, waits for it, then closes the database). Before, the
 * database closed under it and the process exited mid-request: the client saw its connection cut.
 */
const provider = await startFakeOpenAI();
afterAll(() => provider.close());
provider.onText(() => "A reply worth waiting for.");

const ADMIN_PASSWORD = "shutdown-suite-password";

describe("SIGTERM", { timeout: 90_000 }, () => {
  it("answers the request in flight, then exits 0", async () => {
    const server = await startServerProcess({
      PGLITE_DIR: "memory://",
      ADMIN_PASSWORD,
      OPENAI_BASE_URL: provider.url,
      OPENAI_API_KEY: "test-key",
      EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
      LOG_LEVEL: "info",
    });
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
});

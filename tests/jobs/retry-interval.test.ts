import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * RETRY_INTERVAL_MS is the period of the background retry (the run contract), not only the age a
 * failure must reach: with it at 1 s, the Node.js host's own sweep retries a failed episode within
 * a couple of seconds, with nobody calling the sweep by hand (it used to run every 60 s whatever
 * the setting said).
 */
let provider: FakeOpenAI;
let svc: TestService;
beforeAll(async () => {
  provider = await startFakeOpenAI();
  provider.onStructured("episode_summary", () => ({ summary: "second time lucky", keyLearnings: [] }));
  provider.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
  svc = await createTestService({
    provider,
    doorbell: "timers",
    sweep: "interval",
    env: { RETRY_INTERVAL_MS: "1000" },
  });
});
afterAll(async () => {
  await svc?.close();
  await provider?.close();
});

describe("the retry period", () => {
  it("retries a failed episode every RETRY_INTERVAL_MS on the host's own sweep", async () => {
    const { key } = await newTenant(svc, "retry-period");
    const call = async (path: string, json?: unknown) => {
      const res = await svc.request(path, { method: json === undefined ? "GET" : "POST", token: key, json });
      return (await res.json()) as Record<string, unknown>;
    };
    const { threadId } = (await call("/v1/threads", { dataset: "ds" })) as { threadId: string };
    await call(`/v1/memory/working/threads/${threadId}/messages`, { role: "user", content: "remember me" });
    provider.fail({ status: 500, times: 1, endpoint: "chat" });
    const { episodeId } = (await call(`/v1/threads/${threadId}/end`, {})) as { episodeId: string };

    const episode = async () =>
      (await call(`/v1/memory/episodic/episodes/${episodeId}`)).episode as { status: string; retryCount: number };
    await expect.poll(async () => (await episode()).status, { timeout: 5_000 }).toBe("failed");
    const failedAt = Date.now();
    await expect.poll(async () => (await episode()).status, { timeout: 5_000, interval: 100 }).toBe("completed");
    // Retried after at least one period, and well before the old fixed minute.
    expect(Date.now() - failedAt).toBeLessThan(5_000);
    expect((await episode()).retryCount).toBe(1);
  });
});

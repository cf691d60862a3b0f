import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { JOB_CONCURRENCY } from "../../lib/jobs/runner";
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
    // A hung call lasts until the test drops it, however slow the machine.
    llmTimeoutMs: 60_000,
  });
});
afterAll(async () => {
  await svc?.close();
  await provider?.close();
});
beforeEach(async () => {
  // An earlier test's episode may still be extracting in the background: its model calls would
  // take this test's planned failures.
  const episodeJobs = () => svc.deps.db.execute(sql`SELECT 1 FROM jobs WHERE kind = 'episode'`).then(rowsOf);
  await expect.poll(episodeJobs, { timeout: 20_000, interval: 100 }).toEqual([]);
  provider.clearFailures();
  provider.endpointLatencyMs.chat = 0;
});

async function tenant(name: string) {
  const { key } = await newTenant(svc, name);
  const call = async (path: string, json?: unknown) => {
    const res = await svc.request(path, { method: json === undefined ? "GET" : "POST", token: key, json });
    return (await res.json()) as Record<string, unknown>;
  };
  /** A thread with one message, ended: its episode's id. */
  const ended = async (content: string) => {
    const { threadId } = (await call("/v1/threads", { dataset: "ds" })) as { threadId: string };
    await call(`/v1/memory/working/threads/${threadId}/messages`, { role: "user", content });
    return ((await call(`/v1/threads/${threadId}/end`, {})) as { episodeId: string }).episodeId;
  };
  const episode = async (episodeId: string) =>
    (await call(`/v1/memory/episodic/episodes/${episodeId}`)).episode as { status: string; retryCount: number };
  return { call, ended, episode };
}

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

  it("a retry stuck on a hung provider holds back neither the next sweep nor another episode's retry", async () => {
    const t = await tenant("stuck-retry");
    // The first call fails; the second, its retry by a sweep, hangs until the test drops it.
    provider.fail({ status: 500, times: 1, endpoint: "chat" });
    provider.fail({ status: 200, times: 1, endpoint: "chat", hang: true });
    const stuck = await t.ended("the retry of this one hangs");
    await expect
      .poll(() => t.episode(stuck), { timeout: 5_000, interval: 50 })
      .toMatchObject({
        status: "processing",
        retryCount: 1,
      });

    provider.fail({ status: 500, times: 1, endpoint: "chat" });
    const other = await t.ended("this one fails once, then recovers");
    // A later sweep retries it while the first retry still hangs.
    await expect
      .poll(() => t.episode(other), { timeout: 5_000, interval: 50 })
      .toMatchObject({
        status: "completed",
        retryCount: 1,
      });
    expect(await t.episode(stuck)).toMatchObject({ status: "processing", retryCount: 1 });
    provider.dropHung();
    await expect
      .poll(() => t.episode(stuck), { timeout: 10_000, interval: 50 })
      .toMatchObject({
        status: "completed",
      });
  });

  it("runs at most JOB_CONCURRENCY jobs at once, the doorbell's and the sweep's together", async () => {
    const t = await tenant("concurrency");
    provider.endpointLatencyMs.chat = 400;
    provider.peakInFlight = provider.inFlight;
    const episodes = await Promise.all(Array.from({ length: 40 }, (_, i) => t.ended(`thread number ${i}`)));
    for (const episodeId of episodes) {
      await expect
        .poll(async () => (await t.episode(episodeId)).status, { timeout: 30_000, interval: 100 })
        .toBe("completed");
    }
    // Each job makes one model call at a time (summary, then extraction).
    expect(provider.peakInFlight).toBeGreaterThan(1);
    expect(provider.peakInFlight).toBeLessThanOrEqual(JOB_CONCURRENCY);
  });
});

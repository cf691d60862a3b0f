import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDueJobs } from "../../lib/jobs/runner";
import { type FakeOpenAI, reportedUsage, startFakeOpenAI } from "../helpers/fake-openai";
import { type Family, metricValue, parseMetrics, sampleOf } from "../helpers/prometheus";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Issue 36, metrics: with METRICS_TOKEN set, the Node.js host serves Prometheus metrics at
 * GET /metrics behind that bearer token. The text is read by a Prometheus parser of its own.
 */

const TOKEN = "metrics-token-for-tests-0123456789";
const MESSAGES_ROUTE = "/v1/memory/working/threads/:threadId/messages";

let fake: FakeOpenAI;
let svc: TestService;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  fake.onStructured("episode_summary", () => ({ summary: "They moved to Porto", keyLearnings: [] }));
  fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
  svc = await createTestService({ provider: fake, manualTime: true, env: { METRICS_TOKEN: TOKEN } });
});
afterAll(async () => {
  await svc.close();
  await fake.close();
});

async function scrape(): Promise<Map<string, Family>> {
  const res = await svc.request("/metrics", { token: TOKEN });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseMetrics(await res.text());
}

async function threadWithMessages(key: string, contents: string[]) {
  const created = await svc.request("/v1/threads", { method: "POST", token: key, json: { dataset: "ds" } });
  const { threadId } = (await created.json()) as { threadId: string };
  for (const [i, content] of contents.entries()) {
    const res = await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
      method: "POST",
      token: key,
      json: { role: i % 2 ? "assistant" : "user", content },
    });
    expect(res.status).toBe(201);
  }
  return threadId;
}

describe("GET /metrics", () => {
  it("is 401 without the token, with another token, or with an API key", async () => {
    const t = await newTenant(svc);
    for (const token of [undefined, "not-the-metrics-token-at-all", t.key]) {
      const res = await svc.request("/metrics", { token });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "Invalid metrics token" });
    }
  });

  it("counts requests and their latency by method, route template and status", async () => {
    const t = await newTenant(svc);
    const before = await scrape();
    const labels = { method: "POST", route: MESSAGES_ROUTE, status: "201" };
    await threadWithMessages(t.key, ["one", "two", "three"]);
    await svc.request("/no/such/route/thr_123");
    const after = await scrape();

    expect(after.get("http_requests_total")?.type).toBe("COUNTER");
    expect(metricValue(after, "http_requests_total", labels) - metricValue(before, "http_requests_total", labels)).toBe(
      3,
    );
    expect(after.get("http_request_duration_seconds")?.type).toBe("HISTOGRAM");
    const count = (families: Map<string, Family>) =>
      metricValue(families, "http_request_duration_seconds_count", labels);
    expect(count(after) - count(before)).toBe(3);
    expect(metricValue(after, "http_request_duration_seconds_bucket", { ...labels, le: "+Inf" })).toBe(count(after));
    // An unknown path is one label, never the path itself.
    expect(metricValue(after, "http_requests_total", { route: "unmatched", status: "404" })).toBeGreaterThan(0);
    const routes = after.get("http_requests_total")?.metrics.map((m) => m.labels?.route) ?? [];
    expect(routes.some((r) => r?.includes("thr_"))).toBe(false);
  });

  it("reports the job queue by kind, the jobs run, the provider's calls and tokens, and episode lag", async () => {
    const t = await newTenant(svc);
    const threadId = await threadWithMessages(t.key, ["We moved to Porto last spring", "How do you like it?"]);
    const queued = await scrape();
    // The thread's idle timer waits for its time; every known kind is reported, at zero if need be.
    expect(metricValue(queued, "memory_jobs", { kind: "thread-idle", state: "scheduled" })).toBeGreaterThanOrEqual(1);
    expect(sampleOf(queued, "memory_jobs", { kind: "webhook", state: "due" })?.value).toBe("0");

    const ended = await svc.request(`/v1/threads/${threadId}/end`, { method: "POST", token: t.key });
    expect(ended.status).toBe(200);
    svc.clock?.advance(5_000);
    const due = await scrape();
    expect(metricValue(due, "memory_jobs", { kind: "episode", state: "due" })).toBe(1);
    expect(metricValue(due, "memory_job_oldest_due_seconds", { kind: "episode" })).toBe(5);

    const calls = { operation: "chat", kind: "episode_summary" };
    await runDueJobs(svc.deps);
    const ran = await scrape();
    expect(metricValue(ran, "memory_job_runs_total", { kind: "episode", outcome: "done" })).toBe(1);
    expect(metricValue(ran, "memory_jobs", { kind: "episode", state: "due" })).toBe(0);
    expect(metricValue(ran, "memory_provider_calls_total", { ...calls, outcome: "ok" })).toBe(1);
    // The tokens the fake provider reported for the summary call.
    const reported = reportedUsage(fake, "episode_summary");
    expect(metricValue(ran, "memory_provider_tokens_total", { ...calls, type: "input" })).toBe(reported.prompt_tokens);
    expect(metricValue(ran, "memory_provider_tokens_total", { ...calls, type: "output" })).toBe(
      reported.completion_tokens,
    );
    expect(
      metricValue(ran, "memory_provider_tokens_total", { operation: "embeddings", kind: "embedding", type: "input" }),
    ).toBeGreaterThan(0);
    expect(metricValue(ran, "memory_provider_call_duration_seconds_count", calls)).toBe(1);
    // Ended, then summarised 5 s later on the manual clock.
    expect(metricValue(ran, "memory_episode_lag_seconds_count")).toBe(1);
    expect(metricValue(ran, "memory_episode_lag_seconds_sum")).toBe(5);
    expect(metricValue(ran, "memory_episode_lag_seconds_bucket", { le: "5" })).toBe(1);
    expect(metricValue(ran, "memory_episode_lag_seconds_bucket", { le: "2" })).toBe(0);
  });

  it("counts a failed provider call by its error type", async () => {
    const t = await newTenant(svc);
    fake.fail({ status: 503, times: 1, endpoint: "embeddings" });
    try {
      const res = await svc.request("/v1/memory/recall", {
        method: "POST",
        token: t.key,
        json: { dataset: "ds", query: "where do they live now?" },
      });
      expect(res.status).toBe(200);
    } finally {
      fake.clearFailures();
    }
    const after = await scrape();
    const labels = { operation: "embeddings", kind: "embedding" };
    expect(metricValue(after, "memory_provider_errors_total", { ...labels, error_type: "503" })).toBe(1);
    expect(metricValue(after, "memory_provider_calls_total", { ...labels, outcome: "error" })).toBe(1);
  });

  it("counts a streamed chat the provider refused by its status, as a call without streaming", async () => {
    const t = await newTenant(svc);
    const threadId = await threadWithMessages(t.key, []);
    fake.fail({ status: 429, times: 1, endpoint: "chat" });
    try {
      const res = await svc.request(`/v1/memory/working/threads/${threadId}/chat`, {
        method: "POST",
        token: t.key,
        headers: { accept: "text/event-stream" },
        json: { content: "hello there" },
      });
      await res.text();
    } finally {
      fake.clearFailures();
    }
    const after = await scrape();
    const labels = { operation: "chat", kind: "stream" };
    expect(metricValue(after, "memory_provider_errors_total", { ...labels, error_type: "429" })).toBe(1);
    expect(metricValue(after, "memory_provider_errors_total", { ...labels, error_type: "_OTHER" })).toBe(0);
  });

  it("reports the database's connections and the process's own metrics", async () => {
    const families = await scrape();
    if (svc.deps.database.kind === "pglite") {
      // One connection in the process; nothing more to say about it.
      expect(metricValue(families, "memory_db_pool_max")).toBe(1);
      expect(families.has("memory_db_pool_connections")).toBe(false);
    } else {
      expect(metricValue(families, "memory_db_pool_max")).toBe(10);
      expect(
        families
          .get("memory_db_pool_connections")
          ?.metrics.map((m) => m.labels?.state)
          .sort(),
      ).toEqual(["idle", "in_use"]);
      expect(families.has("memory_db_pool_waiting")).toBe(true);
    }
    expect(families.has("process_cpu_user_seconds_total")).toBe(true);
  });
});

describe("without METRICS_TOKEN", () => {
  it("there is no /metrics", async () => {
    const bare = await createTestService();
    try {
      expect(bare.observability).toBeUndefined();
      const res = await bare.request("/metrics", { token: TOKEN });
      expect(res.status).toBe(404);
    } finally {
      await bare.close();
    }
  });
});

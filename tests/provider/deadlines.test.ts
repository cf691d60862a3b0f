import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { patchProjectSettings } from "../../lib/settings/store";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * A request's model calls end at their deadline (lib/config.ts PROVIDER_DEADLINES), retries
 * included, and the request degrades as the spec says, however long the provider hangs. The test
 * client's own timeout is 5 s a call; the deadlines here are 200 ms, so a request that answers
 * within 2 s ended its call at the deadline.
 */
let fake: FakeOpenAI;
let svc: TestService;
const DEADLINE_MS = 200;
const WELL_BEFORE_THE_CLIENT_TIMEOUT_MS = 2_000;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({
    provider: fake,
    providerDeadlines: { queryEmbeddingMs: DEADLINE_MS, synthesisMs: DEADLINE_MS, inlineCompactionMs: DEADLINE_MS },
  });
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.onText(() => "a summary");
});

/** The fields these tests read, of whichever answer. */
interface Answer {
  threadId: string;
  messages: { content: string }[];
  synthesis: string | null;
  context: string;
  compacted: boolean;
  compactedThreadIds: string[];
  error: string;
}

async function tenant() {
  const t = await newTenant(svc, "deadlines");
  const call = async (path: string, json?: unknown, method = json === undefined ? "GET" : "POST") => {
    const started = performance.now();
    const res = await svc.request(path, { method, token: t.key, json });
    const body = (await res.json()) as Answer;
    return { status: res.status, body, ms: performance.now() - started };
  };
  const thread = async (dataset = "ds") => (await call("/v1/threads", { dataset })).body.threadId;
  const say = (threadId: string, content: string) =>
    call(`/v1/memory/working/threads/${threadId}/messages`, { role: "user", content });
  return { ...t, call, thread, say };
}

describe("a request's model calls end at their deadline", () => {
  it("recall: a hung query embedding, then keyword and recency (the message found by its word)", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.say(threadId, "I play badminton every Saturday");
    fake.fail({ status: 200, times: 1, endpoint: "embeddings", hang: true });
    const recall = await t.call("/v1/memory/recall", { dataset: "ds", query: "badminton", include: ["messages"] });
    expect(recall.status).toBe(200);
    expect(recall.body.messages.map((m) => m.content)).toEqual(["I play badminton every Saturday"]);
    expect(recall.ms).toBeLessThan(WELL_BEFORE_THE_CLIENT_TIMEOUT_MS);
  });

  it("recall: a hung synthesis, then synthesis null and the rest of the answer", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.say(threadId, "I play badminton every Saturday");
    fake.fail({ status: 200, times: 1, endpoint: "chat", hang: true });
    const recall = await t.call("/v1/memory/recall", {
      dataset: "ds",
      query: "badminton",
      include: ["messages", "synthesis"],
    });
    expect(recall.status).toBe(200);
    expect(recall.body.synthesis).toBeNull();
    expect(recall.body.context).toContain("badminton");
    expect(recall.ms).toBeLessThan(WELL_BEFORE_THE_CLIENT_TIMEOUT_MS);
  });

  it("the episode search: a hung query embedding is its 500, soon", async () => {
    const t = await tenant();
    fake.fail({ status: 200, times: 1, endpoint: "embeddings", hang: true });
    const search = await t.call("/v1/memory/episodic/datasets/ds/episodes/search?q=badminton");
    expect({ status: search.status, body: search.body }).toEqual({
      status: 500,
      body: { error: "Failed to search episodes" },
    });
    expect(search.ms).toBeLessThan(WELL_BEFORE_THE_CLIENT_TIMEOUT_MS);
  });

  it("add message: a hung auto-compaction stores the message uncompacted (201)", async () => {
    const t = await tenant();
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: 10 } });
    const threadId = await t.thread();
    for (let i = 1; i < 10; i++) await t.say(threadId, `message ${i}`);
    fake.fail({ status: 200, times: 1, endpoint: "chat", hang: true });
    const tenth = await t.say(threadId, "message 10");
    expect(tenth.status).toBe(201);
    expect(tenth.body.compacted).toBe(false);
    expect(tenth.ms).toBeLessThan(WELL_BEFORE_THE_CLIENT_TIMEOUT_MS);
    const list = await t.call(`/v1/memory/working/threads/${threadId}/messages?limit=100`);
    expect(list.body.messages.map((m) => m.content)).toContain("message 10");
  });

  it("batch: one deadline for every thread's auto-compaction together", async () => {
    const t = await tenant();
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: 10 } });
    const threads = [await t.thread(), await t.thread()];
    fake.fail({ status: 200, times: 2, endpoint: "chat", hang: true });
    const batch = await t.call("/v1/memory/working/messages:batch", {
      messages: threads.flatMap((threadId) =>
        Array.from({ length: 10 }, (_, i) => ({ threadId, role: "user", content: `message ${i + 1}` })),
      ),
    });
    expect(batch.status).toBe(201);
    expect(batch.body.compactedThreadIds).toEqual([]);
    // The first compaction used the deadline up: the second was never sent.
    expect(fake.chatCalls()).toHaveLength(1);
    expect(batch.ms).toBeLessThan(WELL_BEFORE_THE_CLIENT_TIMEOUT_MS);
  });
});

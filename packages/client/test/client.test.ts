import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatRequest } from "../../../tests/helpers/fake-openai";
import {
  type CallOptions,
  type ChatEvent,
  createMemoryClient,
  type MemoryApiError,
  type MemoryClient,
  MemoryEpisodeFailedError,
  MemoryError,
  MemoryNetworkError,
  MemoryTimeoutError,
  MemoryValidationError,
  MemoryWaitTimeoutError,
  type RetryEvent,
} from "../src/index.js";
import { demoFacts, type Host, startHost } from "./helpers/host.js";
import { type Fault, type Seen, startFaultProxy } from "./helpers/proxy.js";

/**
 * The client against the Node.js host over HTTP: every /v1 operation at least once, the service's
 * errors as typed errors with its own messages, and retries, timeouts and aborts through a real
 * proxy that injects faults between the two.
 */
let host: Host;
beforeAll(async () => {
  host = await startHost();
});
afterAll(async () => {
  await host?.close();
});

async function client(options: Partial<Parameters<typeof createMemoryClient>[0]> = {}) {
  const { key } = await host.tenant();
  return createMemoryClient({ baseUrl: host.url, apiKey: key, backoff: { baseDelayMs: 5 }, ...options });
}

/** Rejects with what the promise throws (fails the test when it does not throw). */
async function thrown(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected the call to fail");
}

describe("every /v1 operation", () => {
  it("threads, messages, episodes, facts, entities, recall and datasets", async () => {
    const memory = await client();
    const dataset = "client/every op"; // a reserved character: the path parameter is encoded

    const thread = await memory.threads.create({ dataset, tags: ["sdk"] });
    expect(thread).toMatchObject({ dataset, tags: ["sdk"] });
    expect(await memory.threads.get(thread.threadId)).toMatchObject({ threadId: thread.threadId, dataset });
    expect(await memory.threads.update(thread.threadId, { tags: ["sdk", "typed"] })).toMatchObject({
      tags: ["sdk", "typed"],
    });

    const added = await memory.threads.addMessage(thread.threadId, {
      role: "user",
      content: "Hi! I live in Lisbon and I work as a nurse at Santa Maria.",
    });
    expect(added).toMatchObject({ threadId: thread.threadId, sequenceNumber: 1, role: "user" });
    const batch = await memory.threads.addMessages(thread.threadId, [
      { role: "assistant", content: "Nice to meet you." },
      { role: "user", content: "I love hiking in Sintra." },
    ]);
    expect(batch.messages.map((m) => m.sequenceNumber)).toEqual([2, 3]);
    const other = await memory.threads.create({ dataset: "client/other" });
    const across = await memory.addMessages([
      { threadId: other.threadId, role: "user", content: "Another thread." },
      { threadId: thread.threadId, role: "assistant", content: "Sintra is lovely." },
    ]);
    expect(across.messages).toHaveLength(2);

    const listed = await memory.threads.messages(thread.threadId, { limit: 2, order: "asc" });
    expect(listed).toMatchObject({ total: 4, hasMore: true });
    // The newest page, oldest first.
    expect(listed.messages.map((m) => m.sequenceNumber)).toEqual([3, 4]);
    const window = await memory.threads.prepare(thread.threadId, { messageLimit: 3 });
    expect(window).toMatchObject({ threadId: thread.threadId, dataset, messageCount: 4, truncated: true });
    expect(await memory.threads.stats(thread.threadId)).toMatchObject({ messageCount: 4 });
    expect(await memory.threads.compact(thread.threadId)).toMatchObject({ compacted: false });

    host.provider.onText(() => "Lisbon is a fine place for a nurse.");
    const reply = await memory.threads.chat(thread.threadId, { content: "Where do I live?" });
    expect(reply.reply).toMatchObject({ content: "Lisbon is a fine place for a nurse." });
    const events = [];
    for await (const event of memory.threads.chatStream(thread.threadId, { content: "And where do I work?" })) {
      events.push(event);
    }
    expect(events[0].event).toBe("start");
    expect(events.filter((e) => e.event === "delta").length).toBeGreaterThan(1);
    expect(events.at(-1)).toMatchObject({ event: "done", data: { reply: { content: expect.any(String) } } });

    await memory.threads.end(thread.threadId);
    await host.runJobs();
    const episodes = await memory.episodes.list(dataset, { limit: 5 });
    expect(episodes.episodes).toHaveLength(1);
    const episode = episodes.episodes[0];
    expect(await memory.episodes.get(episode.episodeId)).toMatchObject({ episode: { status: "completed" } });
    expect((await memory.episodes.search(dataset, "nurse Lisbon")).episodes[0]?.episodeId).toBe(episode.episodeId);

    const facts = await memory.facts.list(dataset, { limit: 20 });
    const objects = facts.facts.map((f) => f.object);
    expect(objects).toEqual(expect.arrayContaining(["Lisbon", "Santa Maria"]));
    const entities = await memory.entities.list(dataset);
    expect(entities.entities.map((e) => e.name)).toContain("Lisbon");
    expect((await memory.entities.facts(dataset, "Lisbon")).facts.map((f) => f.predicate)).toContain("lives_in");

    const recalled = await memory.recall({ dataset, query: "Where does the user live?", include: ["raw"] });
    expect(recalled.context).toContain("Lisbon");
    expect(recalled.facts?.length).toBeGreaterThan(0);

    const lisbon = facts.facts.find((f) => f.object === "Lisbon")!;
    await memory.facts.delete(dataset, lisbon.factId);
    expect((await memory.facts.list(dataset)).facts.map((f) => f.factId)).not.toContain(lisbon.factId);

    // Retrying a completed episode is refused with the spec's message, typed.
    const refused = (await thrown(memory.episodes.retry(episode.episodeId))) as MemoryApiError;
    expect(refused).toMatchObject({
      name: "MemoryApiError",
      status: 400,
      message: "Only failed episodes can be retried",
    });
    expect(await memory.episodes.delete(episode.episodeId)).toEqual({ episodeId: episode.episodeId, deleted: true });

    const spent = await memory.usage({ groupBy: "operation" });
    expect(spent.total.calls).toBeGreaterThan(0);
    expect(spent.groups.map((g) => g.key)).toContain("episode_summary");

    const exported = await memory.datasets.export(dataset);
    expect(exported.threads.map((t) => t.threadId)).toContain(thread.threadId);
    const erased = await memory.datasets.delete(dataset);
    expect(erased).toMatchObject({ dataset, deleted: { threads: 1, episodes: 1 } });
  });
});

describe("recall with the conversation", () => {
  it("asks for messages when no include is given: a message is recalled as soon as it is stored", async () => {
    const memory = await client();
    const dataset = "client/messages";
    const thread = await memory.threads.create({ dataset });
    const added = await memory.threads.addMessage(thread.threadId, {
      role: "user",
      content: "I just adopted a greyhound called Pixel.",
    });

    const recalled = await memory.recall({ dataset, query: "What is the name of my greyhound?" });
    expect(recalled.messages).toEqual([
      expect.objectContaining({ messageId: added.messageId, threadId: thread.threadId, role: "user" }),
    ]);
    expect(recalled.context).toContain("# CONVERSATION");
    expect(recalled.context).toContain("user: I just adopted a greyhound called Pixel.");
    expect(recalled.factCount).toBe(0);

    // A given include is sent as it is: [] is the spec's facts-only answer, empty without facts.
    const plain = await memory.recall({ dataset, query: "What is the name of my greyhound?", include: [] });
    expect(plain).toMatchObject({ context: "", messages: null });
    expect((await memory.recall({ dataset, query: "greyhound", include: ["raw"] })).messages).toBeNull();
    const capped = await memory.recall({ dataset, include: ["messages", "raw"], messageLimit: 1 });
    expect(capped.messages).toHaveLength(1);
    expect(capped.facts).toEqual([]);
  });
});

describe("episodes.waitFor", () => {
  async function endedThread(memory: Awaited<ReturnType<typeof client>>, dataset: string) {
    const thread = await memory.threads.create({ dataset });
    await memory.threads.addMessage(thread.threadId, { role: "user", content: "I live in Porto." });
    const { episodeId } = await memory.threads.end(thread.threadId);
    expect(episodeId).toMatch(/^epi_/);
    return episodeId as string;
  }

  it("resolves once the episode is completed; with facts, once its extraction is done", async () => {
    const memory = await client();
    const dataset = "client/wait";
    const episodeId = await endedThread(memory, dataset);
    // Fact extraction waits on a gate, so the summary is done well before the facts are.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    host.provider.onStructured("fact_extraction", async (r) => {
      await gate;
      return demoFacts(r);
    });
    try {
      const jobs = host.runJobs();
      const completed = await memory.episodes.waitFor(episodeId, { intervalMs: 20, timeoutMs: 10_000 });
      expect(completed).toMatchObject({ episodeId, status: "completed", extractionReport: null });
      expect(completed.summary).not.toBe("");

      const withFacts = memory.episodes.waitFor(episodeId, { intervalMs: 20, facts: true, timeoutMs: 10_000 });
      const settled = await Promise.race([withFacts.then(() => true), new Promise((r) => setTimeout(r, 200, false))]);
      expect(settled).toBe(false);
      open();
      expect((await withFacts).extractionReport).toMatchObject({ kept: 1 });
      await jobs;
      const recalled = await memory.recall({ dataset, query: "Where does the user live?" });
      expect(recalled.context).toContain("user lives in Porto");
    } finally {
      open();
      host.provider.onStructured("fact_extraction", demoFacts);
    }
  });

  it("rejects with MemoryEpisodeFailedError when summarisation fails", async () => {
    const memory = await client();
    const episodeId = await endedThread(memory, "client/wait-failed");
    host.provider.fail({ status: 500, times: 1, endpoint: "chat" });
    try {
      await host.runJobs();
    } finally {
      host.provider.clearFailures();
    }
    const err = (await thrown(memory.episodes.waitFor(episodeId))) as MemoryEpisodeFailedError;
    expect(err).toBeInstanceOf(MemoryEpisodeFailedError);
    expect(err.episode).toMatchObject({ episodeId, status: "failed", error: expect.any(String) });
    expect(err.message).toContain(`Episode ${episodeId} is failed`);
  });

  it("rejects with MemoryWaitTimeoutError after timeoutMs, and with the reason when aborted", async () => {
    const memory = await client();
    const episodeId = await endedThread(memory, "client/wait-timeout"); // no job runs: it stays pending
    const started = performance.now();
    const err = (await thrown(
      memory.episodes.waitFor(episodeId, { timeoutMs: 300, intervalMs: 50 }),
    )) as MemoryWaitTimeoutError;
    expect(err).toBeInstanceOf(MemoryWaitTimeoutError);
    expect(err).toMatchObject({ timeoutMs: 300, episode: { episodeId, status: "pending" } });
    expect(performance.now() - started).toBeLessThan(1500);

    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("user went away")), 100);
    const aborted = await thrown(memory.episodes.waitFor(episodeId, { signal: controller.signal, intervalMs: 20 }));
    expect(aborted.message).toBe("user went away");
    expect((await thrown(memory.episodes.waitFor("epi_missing"))).message).toBe("Episode not found");
  });
});

describe("episodes.waitFor through failures", () => {
  async function ended(memory: Awaited<ReturnType<typeof client>>, dataset: string) {
    const thread = await memory.threads.create({ dataset });
    await memory.threads.addMessage(thread.threadId, { role: "user", content: "I live in Lagos." });
    return (await memory.threads.end(thread.threadId)).episodeId as string;
  }

  it("polls on through 5xx and lost connections until the deadline; a 4xx still ends it at once", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url });
      const episodeId = await ended(memory, "client/wait-outage");
      for (let i = 0; i < 5; i++) proxy.fail("GET", "/v1/memory/episodic/episodes/", { kind: "status", status: 503 });
      proxy.fail("GET", "/v1/memory/episodic/episodes/", { kind: "reset" });
      const waiting = memory.episodes.waitFor(episodeId, { timeoutMs: 10_000, intervalMs: 20 });
      await new Promise((r) => setTimeout(r, 300));
      await host.runJobs();
      expect(await waiting).toMatchObject({ episodeId, status: "completed" });
      const polls = proxy.seen.filter((s) => s.path.startsWith("/v1/memory/episodic/episodes/"));
      expect(polls.slice(0, 6).map((s) => s.status)).toEqual([503, 503, 503, 503, 503, 0]);

      // Down through the deadline: MemoryWaitTimeoutError, naming the last error.
      const pending = await ended(memory, "client/wait-outage");
      for (let i = 0; i < 100; i++) proxy.fail("GET", "/v1/memory/episodic/episodes/", { kind: "status", status: 503 });
      const started = performance.now();
      const err = (await thrown(
        memory.episodes.waitFor(pending, { timeoutMs: 500, intervalMs: 20 }),
      )) as MemoryWaitTimeoutError;
      expect(err).toBeInstanceOf(MemoryWaitTimeoutError);
      expect(err.lastError).toMatchObject({ status: 503 });
      expect(err.message).toContain("last error: Service Unavailable (proxy)");
      expect(performance.now() - started).toBeLessThan(1500);
      proxy.clear();

      // Hung: the deadline still holds (a poll in flight is cancelled at it). Every poll is held,
      // not only the next request: a poll the wait above left in flight can take the first fault.
      for (let i = 0; i < 10; i++) proxy.fail("GET", "/v1/memory/episodic/episodes/", { kind: "delay", ms: 3000 });
      const hung = performance.now();
      const cut = (await thrown(memory.episodes.waitFor(pending, { timeoutMs: 500 }))) as MemoryWaitTimeoutError;
      expect(cut).toBeInstanceOf(MemoryWaitTimeoutError);
      expect(cut.lastError).toBeInstanceOf(MemoryTimeoutError);
      expect(cut.message).toMatch(/last error: The memory service did not answer within \d+ ms/);
      expect(performance.now() - hung).toBeLessThan(1500);
      proxy.clear();

      const quick = performance.now();
      expect(await thrown(memory.episodes.waitFor("epi_missing", { timeoutMs: 10_000 }))).toMatchObject({
        status: 404,
      });
      proxy.fail("GET", "/v1/memory/episodic/episodes/", {
        kind: "status",
        status: 401,
        body: '{"error":"Invalid API key"}',
      });
      expect(await thrown(memory.episodes.waitFor(pending, { timeoutMs: 10_000 }))).toMatchObject({ status: 401 });
      expect(performance.now() - quick).toBeLessThan(1500);
    } finally {
      await proxy.close();
    }
  });
});

describe("errors", () => {
  it("maps the service's errors to MemoryApiError with the spec's message, status and issues", async () => {
    const memory = await client();
    const missing = (await thrown(memory.threads.get("thr_missing"))) as MemoryApiError;
    expect(missing).toBeInstanceOf(MemoryError);
    expect(missing).toMatchObject({ name: "MemoryApiError", status: 404, message: "Thread not found" });
    expect((await thrown(memory.facts.delete("d", "fct_missing"))).message).toBe("Fact not found");
    expect((await thrown(memory.episodes.get("epi_missing"))).message).toBe("Episode not found");

    const invalid = (await thrown(memory.recall({ dataset: "d", limit: 500 }))) as MemoryApiError;
    expect(invalid).toMatchObject({ status: 400, message: "Validation error" });
    expect(invalid.issues.map((i) => i.path)).toContainEqual(["limit"]);

    const wrongKey = createMemoryClient({ baseUrl: host.url, apiKey: `mk_${"0".repeat(64)}` });
    expect(await thrown(wrongKey.threads.get("thr_x"))).toMatchObject({ status: 401, message: "Invalid API key" });
  });

  it("refuses input the service would reject, before sending anything", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url });
      const cases = [
        () => memory.threads.get(""),
        () => memory.threads.create({ dataset: "" }),
        () => memory.threads.create({ dataset: "x".repeat(257) }),
        () => memory.threads.addMessage("thr_1", { role: "user", content: "" }),
        () => memory.threads.addMessages("thr_1", []),
        () => memory.recall({ dataset: "d", query: "q".repeat(2001) }),
        () => memory.recall({ dataset: "🙂".repeat(257) }),
        () => memory.facts.delete("d", ""),
        () => memory.episodes.search("d", ""),
      ];
      // A rejected promise, never a synchronous throw (`.catch` and `Promise.allSettled` see it).
      for (const call of cases) await expect(call()).rejects.toBeInstanceOf(MemoryValidationError);
      expect(() => createMemoryClient({ baseUrl: host.url, apiKey: "" })).toThrow(MemoryValidationError);
      expect(proxy.seen).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it("refuses a path value . or .., which a URL folds into another route, naming the parameter", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url });
      const cases: [string, () => Promise<unknown>][] = [
        // GET …/entities/../facts would be GET …/datasets/d/facts: every fact of the dataset.
        ["name", () => memory.entities.facts("d", "..")],
        ["name", () => memory.entities.facts("d", ".")],
        ["dataset", () => memory.facts.list("..")],
        ["dataset", () => memory.datasets.delete(".")],
        ["dataset", () => memory.episodes.list("..")],
        ["factId", () => memory.facts.delete("d", "..")],
        ["threadId", () => memory.threads.get("..")],
        ["threadId", () => memory.threads.addMessage(".", { role: "user", content: "hi" })],
        ["threadId", () => memory.threads.chatStream("..", { content: "hi" }).next()],
        ["episodeId", () => memory.episodes.get(".")],
        ["episodeId", () => memory.episodes.retry("..")],
      ];
      for (const [field, call] of cases) {
        const err = await thrown(call());
        expect(err).toBeInstanceOf(MemoryValidationError);
        expect(err).toMatchObject({ field });
      }
      expect(proxy.seen).toEqual([]);
      // Dots inside a value are one segment as any other character: sent.
      expect(await memory.entities.facts("d", "...")).toMatchObject({ facts: [] });
      expect(await memory.facts.list("d.")).toMatchObject({ facts: [] });
    } finally {
      await proxy.close();
    }
  });

  it("refuses an idempotency key the service would refuse, before sending; a quoted comma is sent", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url });
      for (const idempotencyKey of ["", "   ", '""', "a,b", " a, b ", "x".repeat(256), "ключ", "tab\there"]) {
        const err = await thrown(memory.threads.create({ dataset: "keys" }, { idempotencyKey }));
        expect(err).toBeInstanceOf(MemoryValidationError);
        expect(err).toMatchObject({ field: "idempotencyKey" });
        const streamed = await thrown(memory.threads.chatStream("thr_1", { content: "hi" }, { idempotencyKey }).next());
        expect(streamed).toMatchObject({ field: "idempotencyKey" });
      }
      expect(proxy.seen).toEqual([]);
      // A Structured Field string may hold a comma; 255 characters is the longest key.
      await memory.threads.create({ dataset: "keys" }, { idempotencyKey: '"a,b"' });
      await memory.threads.create({ dataset: "keys" }, { idempotencyKey: "k".repeat(255) });
      expect(proxy.seen.map((s) => [s.idempotencyKey, s.status])).toEqual([
        ['"a,b"', 201],
        ["k".repeat(255), 201],
      ]);
    } finally {
      await proxy.close();
    }
  });

  it("counts characters as the service does: a dataset of 256 emoji is sent, not refused", async () => {
    const memory = await client();
    const name = "🙂".repeat(256); // 512 UTF-16 units
    const { threadId } = await memory.threads.create({ dataset: name });
    expect((await memory.threads.get(threadId)).dataset).toBe(name);
    expect(await memory.recall({ dataset: name, query: "🙂".repeat(2000) })).toMatchObject({
      context: "",
      factCount: 0,
    });
  });

  it("a connection refused is a MemoryNetworkError", async () => {
    const proxy = await startFaultProxy(host.url);
    const url = proxy.url;
    await proxy.close();
    const memory = createMemoryClient({ baseUrl: url, apiKey: "mk_x", retries: 0 });
    const err = await thrown(memory.threads.get("thr_1"));
    expect(err).toBeInstanceOf(MemoryNetworkError);
    expect(err.message).toContain("GET /v1/threads/{id}");
  });
});

describe("retries", () => {
  it("a read is retried after a 503 and a 429 (honouring Retry-After) and then succeeds", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const retries: RetryEvent[] = [];
      const memory = await client({ baseUrl: proxy.url, onRetry: (e) => retries.push(e) });
      const thread = await memory.threads.create({ dataset: "retry" });
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 503 });
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 429, retryAfter: "1" });
      const started = performance.now();
      expect(await memory.threads.get(thread.threadId)).toMatchObject({ threadId: thread.threadId });
      expect(performance.now() - started).toBeGreaterThanOrEqual(1000);
      expect(proxy.seen.filter((s) => s.method === "GET").map((s) => s.status)).toEqual([503, 429, 200]);
      expect(retries.map((r) => [r.retry, (r.error as MemoryApiError).status])).toEqual([
        [1, 503],
        [2, 429],
      ]);
      expect(retries[1].delayMs).toBeGreaterThanOrEqual(1000);
    } finally {
      await proxy.close();
    }
  });

  it("a keyed write whose answer was lost is retried with the same key and written once", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url });
      const thread = await memory.threads.create({ dataset: "retry-write" });
      proxy.fail("POST", `/v1/memory/working/threads/${thread.threadId}/messages`, { kind: "lose-answer" });
      proxy.fail("POST", `/v1/memory/working/threads/${thread.threadId}/messages`, { kind: "reset" });
      const added = await memory.threads.addMessage(thread.threadId, { role: "user", content: "only once" });
      expect(added.sequenceNumber).toBe(1);
      const posts = proxy.seen.filter((s) => s.path.endsWith("/messages"));
      expect(posts).toHaveLength(3);
      expect(new Set(posts.map((s) => s.idempotencyKey)).size).toBe(1);
      expect(posts[0].idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
      // The third attempt is answered from the first one's stored answer.
      expect(posts[2]).toMatchObject({ status: 201, replayed: true });
      expect((await memory.threads.messages(thread.threadId)).total).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it("a keyed write past timeoutMs waits out the 409s of its first attempt and gets the stored answer", async () => {
    const proxy = await startFaultProxy(host.url);
    host.provider.endpointLatencyMs.chat = 1500;
    try {
      const memory = await client({ baseUrl: proxy.url, timeoutMs: 1000 });
      const { threadId } = await memory.threads.create({ dataset: "retry-slow-chat" });
      const reply = await memory.threads.chat(threadId, { content: "Take your time." });
      expect(reply.reply.content).toEqual(expect.any(String));
      const posts = proxy.seen.filter((s) => s.path.endsWith("/chat"));
      // The first attempt timed out; the retries met it still running (409), then its stored answer.
      expect(posts.length).toBeGreaterThanOrEqual(3);
      expect(posts.slice(1, -1).every((s) => s.status === 409)).toBe(true);
      expect(posts.at(-1)).toMatchObject({ status: 200, replayed: true });
      expect(new Set(posts.map((s) => s.idempotencyKey)).size).toBe(1);
      // The turn is stored once.
      expect((await memory.threads.messages(threadId)).total).toBe(2);
    } finally {
      host.provider.endpointLatencyMs.chat = 0;
      await proxy.close();
    }
  });

  it("409 waits do not use up retries; giving up, the error carries the key to resume the write with", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url, retries: 1, timeoutMs: 1000 });
      for (let i = 0; i < 4; i++) proxy.fail("POST", "/v1/threads", { kind: "status", status: 409, retryAfter: "0" });
      await memory.threads.create({ dataset: "retry-409" });
      expect(proxy.seen.map((s) => s.status)).toEqual([409, 409, 409, 409, 201]);

      // Still running when the call's budget ((retries + 1) x timeoutMs) is spent: a 409 with the key.
      for (let i = 0; i < 50; i++) proxy.fail("POST", "/v1/threads", { kind: "status", status: 409, retryAfter: "0" });
      const started = performance.now();
      const err = (await thrown(
        memory.threads.create({ dataset: "retry-409" }, { timeoutMs: 300, retries: 0 }),
      )) as MemoryApiError;
      expect(performance.now() - started).toBeLessThan(1000);
      expect(err).toMatchObject({ status: 409, idempotencyKey: proxy.seen.at(-1)?.idempotencyKey });
      expect(err.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
      proxy.clear();
      proxy.fail("POST", "/v1/threads", { kind: "lose-answer" });
      const lost = (await thrown(
        memory.threads.create({ dataset: "retry-409" }, { retries: 0 }),
      )) as MemoryNetworkError;
      expect(lost).toBeInstanceOf(MemoryNetworkError);
      expect(lost.idempotencyKey).toBe(proxy.seen.at(-1)?.idempotencyKey);
      // Resumed under its key: the stored answer, not a second thread.
      const resumed = await memory.threads.create({ dataset: "retry-409" }, { idempotencyKey: lost.idempotencyKey });
      expect(proxy.seen.at(-1)).toMatchObject({ status: 201, replayed: true });
      expect((await memory.datasets.export("retry-409")).threads.map((t) => t.threadId)).toEqual(
        expect.arrayContaining([resumed.threadId]),
      );
      expect((await memory.datasets.export("retry-409")).threads).toHaveLength(2);
    } finally {
      await proxy.close();
    }
  });

  it("a 2xx that is not JSON is retried (a write under its key, answered once) and then a MemoryNetworkError", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url });
      proxy.fail("POST", "/v1/threads", { kind: "garble" });
      const thread = await memory.threads.create({ dataset: "retry-garbled" });
      const posts = proxy.seen.filter((s) => s.method === "POST");
      expect(posts.map((s) => [s.status, s.replayed])).toEqual([
        [201, false],
        [201, true],
      ]);
      expect(posts[1].idempotencyKey).toBe(posts[0].idempotencyKey);
      expect((await memory.datasets.export("retry-garbled")).threads.map((t) => t.threadId)).toEqual([thread.threadId]);

      for (let i = 0; i < 3; i++) {
        proxy.fail("GET", "/v1/threads/", { kind: "status", status: 200, body: "<html>captive portal</html>" });
      }
      const err = await thrown(memory.threads.get(thread.threadId));
      expect(err).toBeInstanceOf(MemoryNetworkError);
      expect(err.message).toMatch(/^GET \/v1\/threads\/\{id\}: the answer is not JSON \(.*"<html>capt/);
      expect(proxy.seen.filter((s) => s.path.startsWith("/v1/threads/"))).toHaveLength(3);
    } finally {
      await proxy.close();
    }
  });

  it("never retries a write sent without an idempotency key", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url, retries: 5 });
      proxy.fail("POST", "/v1/threads", { kind: "status", status: 503 });
      const err = (await thrown(
        memory.threads.create({ dataset: "unkeyed" }, { idempotencyKey: false }),
      )) as MemoryApiError;
      expect(err).toMatchObject({ status: 503, message: "Service Unavailable (proxy)" });
      proxy.fail("POST", "/v1/threads", { kind: "reset" });
      const noKeys = await client({ baseUrl: proxy.url, retries: 5, idempotencyKeys: false });
      expect(await thrown(noKeys.threads.create({ dataset: "unkeyed" }))).toBeInstanceOf(MemoryNetworkError);
      const posts = proxy.seen.filter((s) => s.method === "POST");
      expect(posts).toHaveLength(2);
      expect(posts.every((s) => s.idempotencyKey === undefined)).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it("does not retry a 4xx, nor wait for a Retry-After beyond the longest backoff", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url, backoff: { baseDelayMs: 5, maxDelayMs: 500 } });
      await thrown(memory.threads.get("thr_missing"));
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 429, retryAfter: "60" });
      const err = (await thrown(memory.threads.get("thr_x"))) as MemoryApiError;
      expect(err).toMatchObject({ status: 429, retryAfterMs: 60_000 });
      // A proxy's HTML error page still gives a typed error.
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 502, body: "<html>Bad Gateway</html>" });
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 502, body: "<html>Bad Gateway</html>" });
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 502, body: "<html>Bad Gateway</html>" });
      expect(await thrown(memory.threads.get("thr_x"))).toMatchObject({
        status: 502,
        message: "<html>Bad Gateway</html>",
      });
      expect(proxy.seen.map((s) => s.status)).toEqual([404, 429, 502, 502, 502]);
    } finally {
      await proxy.close();
    }
  });
});

/**
 * A fetch answering every call with one SSE body, all of `events` in one chunk, then the end of the
 * body when `end` (else it stays open); records whether it was cancelled.
 */
function streamingFetch(events: string[], end = false) {
  const seen = { calls: 0, cancelled: false };
  const fetch = async () => {
    seen.calls++;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(events.join("")));
        if (end) controller.close();
      },
      cancel() {
        seen.cancelled = true;
      },
    });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
  return { fetch: fetch as unknown as typeof globalThis.fetch, seen };
}

const SSE = [
  'event: start\ndata: {"threadId":"thr_1","userMessageId":"msg_1","factCount":0}\n\n',
  'event: delta\ndata: {"content":"Hel"}\n\n',
  'event: delta\ndata: {"content":"lo"}\n\n',
];

describe("chatStream", () => {
  /** The events of one streamed chat, or what it threw. */
  async function streamed(memory: MemoryClient, threadId: string, content: string, o?: CallOptions) {
    const events: ChatEvent[] = [];
    try {
      for await (const e of memory.threads.chatStream(threadId, { content }, o)) events.push(e);
      return { events };
    } catch (err) {
      return { events, error: err as Error };
    }
  }
  const chatPosts = (proxy: { seen: Seen[] }, threadId: string) =>
    proxy.seen.filter((s) => s.path === `/v1/memory/working/threads/${threadId}/chat`);
  const defaultText = (r: ChatRequest) => `Reply to: ${r.messages.at(-1)?.content ?? ""}`;
  const roles = async (memory: MemoryClient, threadId: string) =>
    (await memory.threads.messages(threadId, { order: "asc" })).messages.map((m) => m.role);

  const beforeHeaders: [string, Fault][] = [
    ["a timeout before its headers", { kind: "delay", ms: 1500 }],
    ["a connection cut before the service saw it", { kind: "reset" }],
    ["an answer lost whole (the service streamed it, the client heard nothing)", { kind: "lose-answer" }],
  ];
  for (const [name, fault] of beforeHeaders) {
    it(`is retried under its key after ${name}, and the turn is stored once`, async () => {
      const proxy = await startFaultProxy(host.url);
      host.provider.onText(() => "Noted, once.");
      try {
        const memory = await client({ baseUrl: proxy.url, retries: 3 });
        const { threadId } = await memory.threads.create({ dataset: `stream-retry-${fault.kind}` });
        proxy.fail("POST", `/v1/memory/working/threads/${threadId}/chat`, fault);
        // Short only where the fault is a timeout: the others must fail as named, not time out.
        const timeoutMs = fault.kind === "delay" ? 300 : 5000;
        const { events, error } = await streamed(memory, threadId, "Only once, please.", { timeoutMs });
        expect(error).toBeUndefined();
        expect(events[0]).toMatchObject({ event: "start", data: { threadId } });
        expect(
          events
            .filter((e) => e.event === "delta")
            .map((e) => e.data.content)
            .join(""),
        ).toBe("Noted, once.");
        expect(events.at(-1)).toMatchObject({ event: "done", data: { reply: { content: "Noted, once." } } });
        const posts = chatPosts(proxy, threadId);
        expect(posts.length).toBeGreaterThanOrEqual(2);
        expect(new Set(posts.map((s) => s.idempotencyKey)).size).toBe(1);
        expect(posts[0].idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
        expect(await roles(memory, threadId)).toEqual(["user", "assistant"]);
        if (fault.kind === "lose-answer") {
          // The repeat got the kept events: the text as one delta.
          expect(posts.at(-1)).toMatchObject({ status: 200, replayed: true });
          expect(events.map((e) => e.event)).toEqual(["start", "delta", "done"]);
        }
      } finally {
        host.provider.onText(defaultText);
        await proxy.close();
      }
    });
  }

  it("past timeoutMs before its headers, waits out the 409s of its first attempt and gets its kept events", async () => {
    const proxy = await startFaultProxy(host.url);
    host.provider.endpointLatencyMs.chat = 800;
    try {
      const memory = await client({ baseUrl: proxy.url, timeoutMs: 500, retries: 2 });
      const { threadId } = await memory.threads.create({ dataset: "stream-retry-slow" });
      const { events, error } = await streamed(memory, threadId, "Take your time.");
      expect(error).toBeUndefined();
      const posts = chatPosts(proxy, threadId);
      // The first attempt timed out waiting for its headers; the next met it still running (409),
      // then got what it kept once it ended.
      expect(posts.length).toBeGreaterThanOrEqual(3);
      expect(posts.slice(1, -1).every((s) => s.status === 409)).toBe(true);
      expect(posts.at(-1)).toMatchObject({ status: 200, replayed: true });
      expect(new Set(posts.map((s) => s.idempotencyKey)).size).toBe(1);
      expect(events[0]).toMatchObject({ event: "start", data: { threadId } });
      expect(["done", "error"]).toContain(events.at(-1)?.event);
      // The user message is stored once, whatever became of the reply.
      expect((await roles(memory, threadId)).filter((r) => r === "user")).toHaveLength(1);
    } finally {
      host.provider.endpointLatencyMs.chat = 0;
      await proxy.close();
    }
  });

  it("is not asked again once it has started: a stream cut or stalled midway throws", async () => {
    const proxy = await startFaultProxy(host.url);
    host.provider.onText(() => "one two three four five six seven eight");
    try {
      const memory = await client({ baseUrl: proxy.url, retries: 3 });
      const cut = await memory.threads.create({ dataset: "stream-cut" });
      proxy.fail("POST", `/v1/memory/working/threads/${cut.threadId}/chat`, { kind: "cut-after-start" });
      const broken = await streamed(memory, cut.threadId, "Count for me.");
      expect(broken.error).toBeDefined();
      expect(broken.events[0]).toMatchObject({ event: "start" });
      expect(broken.events.some((e) => e.event === "done")).toBe(false);
      expect(chatPosts(proxy, cut.threadId)).toHaveLength(1);

      host.provider.streamChunkDelayMs = 1000;
      const stalled = await memory.threads.create({ dataset: "stream-stalled" });
      const slow = await streamed(memory, stalled.threadId, "Count slowly.", { timeoutMs: 300 });
      expect(slow.error).toBeInstanceOf(MemoryTimeoutError);
      expect(slow.error?.message).toContain("stalled");
      expect(slow.events[0]).toMatchObject({ event: "start" });
      expect(chatPosts(proxy, stalled.threadId)).toHaveLength(1);
    } finally {
      host.provider.streamChunkDelayMs = 0;
      host.provider.onText(defaultText);
      await proxy.close();
    }
  });

  it("a stream that fails once started throws with its idempotency key, which resumes the turn", async () => {
    const proxy = await startFaultProxy(host.url);
    host.provider.onText(() => "one two three four five six seven eight");
    try {
      const memory = await client({ baseUrl: proxy.url, retries: 3 });
      const cut = await memory.threads.create({ dataset: "stream-cut-key" });
      proxy.fail("POST", `/v1/memory/working/threads/${cut.threadId}/chat`, { kind: "cut-after-start" });
      const stream = memory.threads.chatStream(cut.threadId, { content: "Count for me." });
      // Known before the first event: the key the stream is sent with.
      expect(stream.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
      const events: ChatEvent[] = [];
      const err = await thrown(
        (async () => {
          for await (const e of stream) events.push(e);
        })(),
      );
      expect(events[0]).toMatchObject({ event: "start" });
      expect(err).toBeInstanceOf(MemoryNetworkError);
      expect(err).toMatchObject({ idempotencyKey: stream.idempotencyKey });
      expect(chatPosts(proxy, cut.threadId).map((s) => s.idempotencyKey)).toEqual([stream.idempotencyKey]);
      // Resumed under its key: the events the service kept, and the user message stored once.
      const resumed = await streamed(memory, cut.threadId, "Count for me.", {
        idempotencyKey: (err as MemoryError).idempotencyKey,
      });
      expect(resumed.error).toBeUndefined();
      expect(["done", "error"]).toContain(resumed.events.at(-1)?.event);
      expect((await roles(memory, cut.threadId)).filter((r) => r === "user")).toHaveLength(1);

      host.provider.streamChunkDelayMs = 1000;
      const stalled = await memory.threads.create({ dataset: "stream-stalled-key" });
      const slow = memory.threads.chatStream(stalled.threadId, { content: "Count slowly." }, { timeoutMs: 300 });
      const timedOut = await thrown(
        (async () => {
          for await (const _ of slow);
        })(),
      );
      expect(timedOut).toBeInstanceOf(MemoryTimeoutError);
      expect(timedOut).toMatchObject({ idempotencyKey: slow.idempotencyKey });
      expect(slow.idempotencyKey).toBeDefined();
    } finally {
      host.provider.streamChunkDelayMs = 0;
      host.provider.onText(defaultText);
      await proxy.close();
    }
  });

  it("a stream that ends before its done event throws with its key; an error event comes with the key on the stream", async () => {
    const { fetch: endsEarly } = streamingFetch(SSE, true);
    const memory = createMemoryClient({ baseUrl: "http://memory.test", apiKey: "mk_x", fetch: endsEarly });
    const stream = memory.threads.chatStream("thr_1", { content: "hi" }, { idempotencyKey: "turn-1" });
    expect(stream.idempotencyKey).toBe("turn-1");
    const got: string[] = [];
    const err = await thrown(
      (async () => {
        for await (const e of stream) got.push(e.event);
      })(),
    );
    expect(got).toEqual(["start", "delta", "delta"]);
    expect(err).toBeInstanceOf(MemoryNetworkError);
    expect(err.message).toContain("before its done event");
    expect(err).toMatchObject({ idempotencyKey: "turn-1" });

    // The service's error event is the stream's last event (not thrown); its key is the stream's.
    const { fetch: failing } = streamingFetch([...SSE, 'event: error\ndata: {"error":"model failed"}\n\n'], true);
    const other = createMemoryClient({ baseUrl: "http://memory.test", apiKey: "mk_x", fetch: failing });
    const failed = other.threads.chatStream("thr_1", { content: "hi" });
    const events: ChatEvent[] = [];
    for await (const e of failed) events.push(e);
    expect(events.at(-1)).toEqual({ event: "error", data: { error: "model failed" } });
    expect(failed.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    // Sent without a key: none to resume with.
    expect(other.threads.chatStream("thr_1", { content: "hi" }, { idempotencyKey: false }).idempotencyKey).toBe(
      undefined,
    );
    const unkeyed = createMemoryClient({
      baseUrl: "http://memory.test",
      apiKey: "mk_x",
      fetch: failing,
      idempotencyKeys: false,
    });
    expect(unkeyed.threads.chatStream("thr_1", { content: "hi" }).idempotencyKey).toBe(undefined);
  });

  it("without a key is never retried", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const unkeyed = await client({ baseUrl: proxy.url, retries: 3, idempotencyKeys: false });
      const keyed = await client({ baseUrl: proxy.url, retries: 3 });
      const { threadId } = await unkeyed.threads.create({ dataset: "stream-unkeyed" });
      for (const [memory, o] of [
        [unkeyed, {}],
        [keyed, { idempotencyKey: false }],
      ] as const) {
        proxy.fail("POST", `/v1/memory/working/threads/${threadId}/chat`, { kind: "reset" });
        const { error } = await streamed(memory, threadId, "Once.", { ...o, timeoutMs: 300 });
        expect(error).toBeInstanceOf(MemoryNetworkError);
      }
      const posts = chatPosts(proxy, threadId);
      expect(posts).toHaveLength(2);
      expect(posts.every((s) => s.idempotencyKey === undefined)).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it("gives out nothing after an abort, though more events were already read", async () => {
    const { fetch, seen } = streamingFetch([...SSE, 'event: done\ndata: {"threadId":"thr_1"}\n\n']);
    const memory = createMemoryClient({ baseUrl: "http://memory.test", apiKey: "mk_x", fetch });
    const controller = new AbortController();
    const got: string[] = [];
    const err = await thrown(
      (async () => {
        for await (const e of memory.threads.chatStream("thr_1", { content: "hi" }, { signal: controller.signal })) {
          got.push(e.event);
          if (e.event === "delta") controller.abort();
        }
      })(),
    );
    expect(err.name).toBe("AbortError");
    expect(got).toEqual(["start", "delta"]);
    expect(seen.cancelled).toBe(true);
  });

  it("ends with a MemoryTimeoutError when no data comes for timeoutMs (each gap, not the whole reply)", async () => {
    // Each event in its own chunk, `gapMs` apart; after the last one the stream ends, or stalls.
    const seen = { cancelled: false };
    const pacedFetch = (events: string[], gapMs: number, end: boolean) =>
      (async () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async start(controller) {
              for (const event of events) {
                controller.enqueue(new TextEncoder().encode(event));
                await new Promise((r) => setTimeout(r, gapMs));
              }
              if (end) controller.close();
            },
            cancel() {
              seen.cancelled = true;
            },
          }),
          { status: 200, headers: { "content-type": "text/event-stream" } },
        )) as unknown as typeof globalThis.fetch;
    const collect = async (memory: ReturnType<typeof createMemoryClient>, got: string[]) => {
      for await (const e of memory.threads.chatStream("thr_1", { content: "hi" })) got.push(e.event);
    };

    const stalled = createMemoryClient({
      baseUrl: "http://memory.test",
      apiKey: "mk_x",
      fetch: pacedFetch(SSE, 0, false),
      timeoutMs: 200,
    });
    const got: string[] = [];
    const started = performance.now();
    const err = await thrown(collect(stalled, got));
    expect(err).toBeInstanceOf(MemoryTimeoutError);
    expect(err.message).toContain("stalled");
    expect(performance.now() - started).toBeLessThan(1000);
    expect(got).toEqual(["start", "delta", "delta"]);
    expect(seen.cancelled).toBe(true);

    // A reply longer than timeoutMs whose chunks keep coming is not cut.
    const done = 'event: done\ndata: {"threadId":"thr_1"}\n\n';
    const steady = createMemoryClient({
      baseUrl: "http://memory.test",
      apiKey: "mk_x",
      fetch: pacedFetch([...SSE, ...SSE.slice(1), done], 100, true),
      timeoutMs: 300,
    });
    const all: string[] = [];
    await collect(steady, all);
    expect(all).toEqual(["start", "delta", "delta", "delta", "delta", "done"]);
  });

  it("closes the response when the loop is left early, so the service stops the reply", async () => {
    const { fetch, seen } = streamingFetch(SSE);
    const memory = createMemoryClient({ baseUrl: "http://memory.test", apiKey: "mk_x", fetch });
    for await (const e of memory.threads.chatStream("thr_1", { content: "hi" })) {
      if (e.event === "start") break;
    }
    expect(seen).toEqual({ calls: 1, cancelled: true });
  });
});

describe("timeouts and aborts", () => {
  it("an attempt past timeoutMs is a MemoryTimeoutError; a retry gets a fresh budget", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url, timeoutMs: 300 });
      const thread = await memory.threads.create({ dataset: "timeout" });
      proxy.fail("GET", "/v1/threads/", { kind: "delay", ms: 1000 });
      const err = await thrown(memory.threads.get(thread.threadId, { retries: 0 }));
      expect(err).toBeInstanceOf(MemoryTimeoutError);
      expect(err).toMatchObject({ timeoutMs: 300 });
      proxy.fail("GET", "/v1/threads/", { kind: "delay", ms: 1000 });
      expect(await memory.threads.get(thread.threadId)).toMatchObject({ threadId: thread.threadId });
    } finally {
      await proxy.close();
    }
  });

  it("timeoutMs: 0 is no limit, for a call, a keyed write and a stream's gaps", async () => {
    const proxy = await startFaultProxy(host.url);
    host.provider.onText(() => "slow but sure");
    try {
      const { key } = await host.tenant();
      const options = { baseUrl: proxy.url, apiKey: key, retries: 0 };
      const memory = createMemoryClient({ ...options, timeoutMs: 0 });
      const thread = await memory.threads.create({ dataset: "no-timeout" });
      proxy.fail("GET", "/v1/threads/", { kind: "delay", ms: 700 });
      expect(await memory.threads.get(thread.threadId)).toMatchObject({ threadId: thread.threadId });
      proxy.fail("POST", "/v1/threads", { kind: "delay", ms: 700 });
      expect(await memory.threads.create({ dataset: "no-timeout" })).toMatchObject({ dataset: "no-timeout" });
      // Per call too, over a client with a short one.
      const short = createMemoryClient({ ...options, timeoutMs: 100 });
      proxy.fail("GET", "/v1/threads/", { kind: "delay", ms: 400 });
      expect(await short.threads.get(thread.threadId, { timeoutMs: 0 })).toMatchObject({ threadId: thread.threadId });
      host.provider.streamChunkDelayMs = 250;
      const events: string[] = [];
      for await (const e of short.threads.chatStream(thread.threadId, { content: "Go slowly." }, { timeoutMs: 0 })) {
        events.push(e.event);
      }
      expect(events.at(-1)).toBe("done");
    } finally {
      host.provider.streamChunkDelayMs = 0;
      host.provider.onText((r) => `Reply to: ${r.messages.at(-1)?.content ?? ""}`);
      await proxy.close();
    }
  });

  it("an AbortSignal cancels the call, and the retries after it", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const memory = await client({ baseUrl: proxy.url, retries: 5 });
      proxy.fail("GET", "/v1/threads/", { kind: "delay", ms: 2000 });
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const started = performance.now();
      const err = await thrown(memory.threads.get("thr_x", { signal: controller.signal }));
      expect(err.name).toBe("AbortError");
      expect(performance.now() - started).toBeLessThan(1500);

      // Aborted while waiting to retry: no further attempt.
      proxy.fail("GET", "/v1/threads/", { kind: "status", status: 503, retryAfter: "5" });
      const during = new AbortController();
      const slow = await client({ baseUrl: proxy.url, backoff: { maxDelayMs: 10_000 } });
      const call = thrown(slow.threads.get("thr_y", { signal: during.signal }));
      await new Promise((r) => setTimeout(r, 200));
      during.abort(new Error("user went away"));
      expect((await call).message).toBe("user went away");
      expect(proxy.seen.filter((s) => s.path.endsWith("thr_y"))).toHaveLength(1);
      // Already aborted: nothing is sent.
      await thrown(memory.threads.get("thr_z", { signal: AbortSignal.abort() }));
      expect(proxy.seen.some((s) => s.path.endsWith("thr_z"))).toBe(false);
    } finally {
      await proxy.close();
    }
  });
});

import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { parseConfig } from "../../lib/config";
import { rowsOf } from "../../lib/db/rows";
import { NO_PROVIDER_MESSAGE, ProviderError } from "../../lib/errors";
import { storable } from "../../lib/inputs";
import { createLlm } from "../../lib/llm/client";
import { CHAT_SYSTEM_PROMPT } from "../../lib/llm/prompts";
import type { ApiSchema } from "../helpers/api-types";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, fakeEmbedding, fakeTokens, startFakeOpenAI } from "../helpers/fake-openai";
import { adminSession, createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * POST /v1/memory/working/threads/:threadId/chat through HTTP against the real database and the
 * fake provider (real `openai` client): what is stored, what the model is sent, what it costs,
 * the failures, and the server-sent-events variant.
 */
const W = "/v1/memory/working/threads";
const FAILED = { error: "Failed to generate reply" };

let svc: TestService;
let fake: FakeOpenAI;
const statements: string[] = [];
let failStatementsMatching: RegExp | undefined;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({
    provider: fake,
    manualTime: true,
    onQuery: (statement) => {
      statements.push(statement);
      if (failStatementsMatching?.test(statement)) throw new Error("injected database failure");
    },
  });
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.onText(() => "You live in Lisbon, as far as I know.");
  failStatementsMatching = undefined;
});

type ChatBody = ApiSchema<"ChatReply">;
type Message = ApiSchema<"Message">;
type Role = Message["role"];
interface SseEvent {
  event: string;
  data: unknown;
}

/** The project's usage ledger rows. */
async function ledgerOf(projectId: string) {
  return rowsOf<{ operation: string; dataset: string | null; outcome: string }>(
    await svc.deps.db.execute(
      sql`SELECT operation, dataset, outcome FROM usage_events WHERE project_id = ${projectId} ORDER BY id`,
    ),
  );
}

/** A tenant with a thread in `dataset`, and helpers bound to both. */
async function tenantWithThread(dataset = `ds-${randomUUID().slice(0, 6)}`) {
  const t = await newTenant(svc, `chat-${randomUUID().slice(0, 6)}`);
  const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset } });
  expect(res.status).toBe(201);
  const { threadId } = (await res.json()) as { threadId: string };
  return {
    ...t,
    dataset,
    threadId,
    chat: (json: unknown, headers: Record<string, string> = {}) =>
      svc.request(`${W}/${threadId}/chat`, { method: "POST", token: t.key, json, headers }),
    async chatOk(json: unknown) {
      const res = await svc.request(`${W}/${threadId}/chat`, { method: "POST", token: t.key, json });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      return JSON.parse(text) as ChatBody;
    },
    async add(role: Role, content: string) {
      const res = await svc.request(`${W}/${threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role, content },
      });
      expect(res.status).toBe(201);
    },
    async messages() {
      const res = await svc.request(`${W}/${threadId}/messages?limit=100`, { token: t.key });
      expect(res.status).toBe(200);
      return ((await res.json()) as { messages: Message[] }).messages;
    },
    /** A live fact in the thread's dataset, embedded like the fake embeds its text. */
    async fact(predicate: string, object: string) {
      const text = `user ${predicate.replaceAll("_", " ")} ${object}`;
      await svc.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
        VALUES (${`fct_${randomUUID().slice(0, 12)}`}, ${t.projectId}, ${dataset}, 'user', ${predicate}, ${object}, 0.9,
                ${`I said ${object}`}, '2026-01-01T00:00:00Z'::timestamptz,
                ${`[${fakeEmbedding(text, TEST_EMBEDDING_DIMENSIONS)}]`}::vector)`);
      return text;
    },
  };
}

/** The stream's events, in order; `data` parsed as JSON. */
async function readEvents(res: Response): Promise<SseEvent[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice("event: ".length) ?? "message";
      const data = lines
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice("data: ".length))
        .join("\n");
      return { event, data: JSON.parse(data) };
    });
}

const SSE = { accept: "text/event-stream" };

// -------------------------------------------------------------------------------------------------

describe("chat (JSON)", () => {
  it("stores the user message and the reply with model, tokens and latency, and answers with both", async () => {
    const t = await tenantWithThread();
    await t.fact("lives_in", "Lisbon");
    fake.latencyMs = 30;
    const body = await t.chatOk({ content: "Where do I live?" });

    const stored = await t.messages();
    expect(stored.map((m) => [m.role, m.content])).toEqual([
      ["user", "Where do I live?"],
      ["assistant", "You live in Lisbon, as far as I know."],
    ]);
    const [user, reply] = stored;
    expect(user).toMatchObject({ tokens: null, model: null, latencyMs: null });
    expect(reply.model).toBe("gpt-4o-mini");
    // The usage the provider reported for the call, as it reported it.
    const usage = fake.requests.findLast((r) => r.endpoint === "chat")?.usage;
    expect(reply.tokens).toEqual({
      input: usage?.prompt_tokens,
      output: usage?.completion_tokens,
      total: usage?.total_tokens,
    });
    expect(reply.tokens?.output).toBe(fakeTokens("You live in Lisbon, as far as I know."));
    // The fake answers after 30 ms: the model call took at least that.
    expect(reply.latencyMs).toBeGreaterThanOrEqual(25);

    expect(body).toEqual({
      threadId: t.threadId,
      reply: {
        messageId: reply.messageId,
        sequenceNumber: 2,
        content: reply.content,
        model: reply.model,
        tokens: reply.tokens,
        latencyMs: reply.latencyMs,
        createdAt: reply.createdAt,
      },
      userMessage: { messageId: user.messageId, sequenceNumber: 1, createdAt: user.createdAt },
      factCount: 1,
      compacted: false,
    });
  });

  it("sends the window and a system prompt with the recalled facts, in one model call and one embedding", async () => {
    const t = await tenantWithThread();
    const fact = await t.fact("lives_in", "Lisbon");
    await t.add("user", "hi there");
    await t.add("assistant", "hello, how can I help?");
    await t.add("tool", "weather: sunny");
    fake.reset();
    // A query not asked before in this service: recall caches query embeddings.
    await t.chatOk({ content: "Which city do I live in?" });

    const calls = fake.chatCalls();
    expect(calls).toHaveLength(1);
    const [system, ...window] = calls[0].messages;
    expect(system.role).toBe("system");
    expect(system.content.startsWith(`${CHAT_SYSTEM_PROMPT}\n\n`)).toBe(true);
    expect(system.content).toContain(`- ${fact} (valid: 2026-01-01 - present)`);
    // A tool output goes as user text: Chat Completions takes tool messages only with a tool_call_id.
    expect(window).toEqual([
      { role: "user", content: "hi there" },
      { role: "assistant", content: "hello, how can I help?" },
      { role: "user", content: "[tool] weather: sunny" },
      { role: "user", content: "Which city do I live in?" },
    ]);
    expect(calls[0].stream).toBeUndefined();

    expect(fake.embeddingCalls()).toHaveLength(1);
    expect(fake.embeddingCalls()[0].input).toEqual(["Which city do I live in?"]);
  });

  it("adds instructions after the chat prompt, and messageLimit bounds the window", async () => {
    const t = await tenantWithThread();
    const fact = await t.fact("likes", "jazz");
    for (let i = 1; i <= 5; i++) await t.add(i % 2 ? "user" : "assistant", `turn ${i}`);
    fake.reset();
    const body = await t.chatOk({ content: "Any music tips?", messageLimit: 2, instructions: "Answer in French." });

    const [call] = fake.chatCalls();
    expect(call.messages.slice(1)).toEqual([
      { role: "user", content: "turn 5" },
      { role: "user", content: "Any music tips?" },
    ]);
    const system = call.messages[0].content;
    expect(system).toContain(`${CHAT_SYSTEM_PROMPT}\n\nAnswer in French.\n\nKnown facts about the user`);
    expect(system).toContain(fact);
    expect(body.factCount).toBe(1);
    expect(body.userMessage.sequenceNumber).toBe(6);
    expect(body.reply.sequenceNumber).toBe(7);
  });

  it("recall: false makes no embedding call and puts no facts in the prompt", async () => {
    const t = await tenantWithThread();
    await t.fact("lives_in", "Lisbon");
    const body = await t.chatOk({ content: "Where do I live?", recall: false });
    expect(body.factCount).toBe(0);
    expect(fake.embeddingCalls()).toHaveLength(0);
    const [call] = fake.chatCalls();
    expect(call.messages[0]).toEqual({ role: "system", content: CHAT_SYSTEM_PROMPT });
  });

  it("a dataset without facts: factCount 0 and the chat prompt alone", async () => {
    const t = await tenantWithThread();
    const body = await t.chatOk({ content: "Hello" });
    expect(body.factCount).toBe(0);
    expect(fake.chatCalls()[0].messages[0].content).toBe(CHAT_SYSTEM_PROMPT);
  });

  it("recalls with the first 2000 characters of a long message, and stores and sends it whole", async () => {
    const t = await tenantWithThread();
    const content = `${"word ".repeat(500)}end`;
    await t.chatOk({ content });
    expect(fake.embeddingCalls()[0].input).toEqual([content.slice(0, 2000)]);
    expect(fake.chatCalls()[0].messages.at(-1)).toEqual({ role: "user", content });
    expect((await t.messages())[0].content).toBe(content);
  });

  it("a recall that fails outright is logged and the reply is made without facts", async () => {
    const t = await tenantWithThread();
    await t.fact("lives_in", "Lisbon");
    failStatementsMatching = /\bWITH s AS\b/;
    const body = await t.chatOk({ content: "Where do I live?" });
    failStatementsMatching = undefined;
    expect(body.factCount).toBe(0);
    expect(fake.chatCalls()[0].messages[0].content).toBe(CHAT_SYSTEM_PROMPT);
    expect((await t.messages()).map((m) => m.role)).toEqual(["user", "assistant"]);
  });

  it("a reply whose statement fails: its provider call still reaches the ledger, under the dataset", async () => {
    const t = await tenantWithThread();
    // The reply's statement: the one that records the call (no recall, so the user message's does not).
    failStatementsMatching = /\busage_recorded AS\b/;
    const res = await t.chat({ content: "hello", recall: false });
    failStatementsMatching = undefined;
    expect(res.status).toBe(500);
    // Not on the failed request's path: the next request's key check writes it.
    expect((await svc.request("/v1/usage", { token: t.key })).status).toBe(200);
    expect(await ledgerOf(t.projectId)).toEqual([{ operation: "chat", dataset: t.dataset, outcome: "ok" }]);
  });

  it("a thread erased during the model call: 404, and the call is recorded under its dataset", async () => {
    const t = await tenantWithThread();
    fake.endpointLatencyMs.chat = 300;
    try {
      const chat = t.chat({ content: "hello", recall: false });
      await expect.poll(() => fake.inFlight, { interval: 10 }).toBe(1);
      const erased = await svc.request(`/v1/memory/recall/datasets/${t.dataset}`, { method: "DELETE", token: t.key });
      expect(erased.status).toBe(200);
      expect((await chat).status).toBe(404);
    } finally {
      fake.endpointLatencyMs.chat = 0;
    }
    expect(await ledgerOf(t.projectId)).toEqual([{ operation: "chat", dataset: t.dataset, outcome: "ok" }]);
  });

  it("an embedding failure degrades recall to keywords: the fact is still found", async () => {
    const t = await tenantWithThread();
    const fact = await t.fact("lives_in", "Lisbon");
    fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
    const body = await t.chatOk({ content: "Tell me about Lisbon" });
    expect(body.factCount).toBe(1);
    expect(fake.chatCalls()[0].messages[0].content).toContain(fact);
  });

  it("an insert that compacts inline: compacted true, and the summary reaches the model as a system message", async () => {
    const t = await tenantWithThread();
    // The default autoCompactThreshold is 20: the chat's own message is the 20th.
    for (let i = 1; i <= 19; i++) await t.add(i % 2 ? "user" : "assistant", `turn ${i}`);
    fake.reset();
    fake.onText((r) => (r.messages[0].content === CHAT_SYSTEM_PROMPT ? "A reply." : "Summary of the early turns."));
    const body = await t.chatOk({ content: "And now?", recall: false });
    expect(body.compacted).toBe(true);
    const calls = fake.chatCalls();
    expect(calls).toHaveLength(2);
    const chatCall = calls[1];
    expect(chatCall.messages[0]).toEqual({ role: "system", content: CHAT_SYSTEM_PROMPT });
    expect(chatCall.messages[1]).toEqual({ role: "system", content: "Summary of the early turns." });
    expect(chatCall.messages.at(-1)).toEqual({ role: "user", content: "And now?" });
  });

  it("costs five statements (auth, user message, window, recall, reply), four without recall", async () => {
    const t = await tenantWithThread();
    await t.fact("lives_in", "Lisbon");
    statements.length = 0;
    await t.chatOk({ content: "Where do I live?" });
    expect(statements, statements.join("\n---\n")).toHaveLength(5);
    expect(statements[0]).toMatch(/api_keys/);
    expect(statements[1]).toMatch(/insert into "messages"/i);
    expect(statements[2]).toMatch(/json_agg/i);
    expect(statements[3]).toMatch(/"facts"|\bfacts\b/i);
    expect(statements[4]).toMatch(/insert into "messages"/i);

    statements.length = 0;
    await t.chatOk({ content: "And where do I work?", recall: false });
    expect(statements).toHaveLength(4);
    expect(statements.some((s) => /\bfacts\b/i.test(s))).toBe(false);
  });
});

describe("chat errors", () => {
  it("404 for an unknown thread or another project's, storing nothing and calling no provider", async () => {
    const owner = await tenantWithThread();
    const other = await newTenant(svc);
    for (const [token, threadId] of [
      [other.key, owner.threadId],
      [owner.key, "thr_unknown"],
    ]) {
      for (const headers of [{}, SSE]) {
        const res = await svc.request(`${W}/${threadId}/chat`, {
          method: "POST",
          token,
          headers,
          json: { content: "hello" },
        });
        expect(res.status).toBe(404);
        expect(res.headers.get("content-type")).toMatch(/^application\/json/);
        expect(await res.json()).toEqual({ error: "Thread not found" });
      }
    }
    expect(await owner.messages()).toEqual([]);
    expect(fake.requests).toHaveLength(0);
  });

  it("a provider failure is 500 Failed to generate reply, and the user message stays stored", async () => {
    const t = await tenantWithThread();
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const res = await t.chat({ content: "Are you there?" });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual(FAILED);
    expect((await t.messages()).map((m) => [m.role, m.content])).toEqual([["user", "Are you there?"]]);

    // A retry stores the message again and then the reply.
    await t.chatOk({ content: "Are you there?" });
    expect((await t.messages()).map((m) => m.role)).toEqual(["user", "user", "assistant"]);
  });

  it("401 without a valid key", async () => {
    const t = await tenantWithThread();
    const res = await svc.request(`${W}/${t.threadId}/chat`, { method: "POST", json: { content: "x" } });
    expect(res.status).toBe(401);
    expect(await t.messages()).toEqual([]);
  });

  const invalid: [string, unknown, (string | number)[]][] = [
    ["content missing", {}, ["content"]],
    ["content empty", { content: "" }, ["content"]],
    ["content not a string", { content: 5 }, ["content"]],
    ["content with NUL", { content: "a\u0000b" }, ["content"]],
    ["messageLimit 0", { content: "x", messageLimit: 0 }, ["messageLimit"]],
    ["messageLimit 101", { content: "x", messageLimit: 101 }, ["messageLimit"]],
    ["messageLimit not an integer", { content: "x", messageLimit: 2.5 }, ["messageLimit"]],
    ["instructions over 4000 characters", { content: "x", instructions: "i".repeat(4001) }, ["instructions"]],
    ["recall not a boolean", { content: "x", recall: "yes" }, ["recall"]],
  ];
  it.each(invalid)("400 for %s, naming the field; nothing stored", async (_, json, path) => {
    const t = await tenantWithThread();
    const res = await t.chat(json);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; issues: { path: (string | number)[] }[] };
    expect(body.error).toBe("Validation error");
    expect(body.issues.map((i) => i.path)).toContainEqual(path);
    expect(await t.messages()).toEqual([]);
    expect(fake.requests).toHaveLength(0);
  });

  it("accepts the bounds and strips unknown fields", async () => {
    const t = await tenantWithThread();
    await t.chatOk({ content: "x", messageLimit: 1, instructions: "i".repeat(4000), surprise: true });
    await t.chatOk({ content: "y", messageLimit: 100, recall: false });
  });
});

describe("chat without a model provider", () => {
  let bare: TestService;
  beforeAll(async () => {
    bare = await createTestService({ env: { OPENAI_API_KEY: "", OPENAI_BASE_URL: "" } });
  });
  afterAll(() => bare?.close());

  it("500 Failed to generate reply with a detail that says no provider is configured, JSON or SSE, storing nothing; 404 first", async () => {
    const t = await newTenant(bare);
    const created = await bare.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } });
    const { threadId } = (await created.json()) as { threadId: string };
    for (const headers of [{}, SSE]) {
      const res = await bare.request(`${W}/${threadId}/chat`, {
        method: "POST",
        token: t.key,
        headers,
        json: { content: "hello?" },
      });
      expect(res.status).toBe(500);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const body = (await res.json()) as { error: string; detail: string };
      expect(body).toEqual({ error: "Failed to generate reply", detail: NO_PROVIDER_MESSAGE });
      expect(body.detail).toMatch(/^No model provider is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL/);
    }
    const messages = await bare.request(`${W}/${threadId}/messages`, { token: t.key });
    expect(((await messages.json()) as { messages: unknown[] }).messages).toEqual([]);
    // The thread check still comes first: an unknown or another project's thread is a 404.
    const other = await newTenant(bare);
    for (const [token, id] of [
      [t.key, "thr_unknown"],
      [other.key, threadId],
    ]) {
      const res = await bare.request(`${W}/${id}/chat`, { method: "POST", token, json: { content: "x" } });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: "Thread not found" });
    }
    // Validation and authentication still come first.
    const invalid = await bare.request(`${W}/${threadId}/chat`, { method: "POST", token: t.key, json: {} });
    expect(invalid.status).toBe(400);
    expect((await bare.request(`${W}/${threadId}/chat`, { method: "POST", json: { content: "x" } })).status).toBe(401);
    expect(fake.requests).toEqual([]);
  });

  it("GET /dashboard/provider says so (the dashboard's banner); with a provider it says configured", async () => {
    const res = await bare.request("/dashboard/provider", { token: await adminSession(bare) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      provider: {
        configured: false,
        llmModel: "gpt-4o-mini",
        embeddingModel: "text-embedding-3-small",
        embeddingDimensions: TEST_EMBEDDING_DIMENSIONS,
      },
    });
    const ok = await svc.request("/dashboard/provider", { token: await adminSession(svc) });
    expect(((await ok.json()) as { provider: { configured: boolean } }).provider.configured).toBe(true);
    expect((await svc.request("/dashboard/provider")).status).toBe(401);
  });

  it("a base URL without a key is a provider (Ollama, vLLM, llama.cpp server): the reply is made", async () => {
    const keyless = await createTestService({ provider: fake, env: { OPENAI_API_KEY: "" } });
    try {
      const t = await newTenant(keyless);
      const created = await keyless.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } });
      const { threadId } = (await created.json()) as { threadId: string };
      const res = await keyless.request(`${W}/${threadId}/chat`, {
        method: "POST",
        token: t.key,
        json: { content: "hello?", recall: false },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as ChatBody).reply.content).toBe("You live in Lisbon, as far as I know.");
      expect(fake.chatCalls()).toHaveLength(1);
    } finally {
      await keyless.close();
    }
  });
});

describe("chat (server-sent events)", () => {
  it("streams start, the deltas and done; the deltas make the stored reply and done is the stored rows", async () => {
    const t = await tenantWithThread();
    await t.fact("lives_in", "Lisbon");
    const res = await t.chat({ content: "Where did I say I live?" }, SSE);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await readEvents(res);

    const names = events.map((e) => e.event);
    expect(names[0]).toBe("start");
    expect(names.at(-1)).toBe("done");
    const deltas = events.filter((e) => e.event === "delta").map((e) => (e.data as { content: string }).content);
    expect(deltas.length).toBeGreaterThan(1);
    expect(names).toEqual(["start", ...deltas.map(() => "delta"), "done"]);

    const stored = await t.messages();
    expect(stored.map((m) => m.role)).toEqual(["user", "assistant"]);
    const [user, reply] = stored;
    expect(events[0].data).toEqual({ threadId: t.threadId, userMessageId: user.messageId, factCount: 1 });
    expect(deltas.join("")).toBe("You live in Lisbon, as far as I know.");
    expect(reply.content).toBe(deltas.join(""));
    // The provider's usage arrives in the stream's last chunk (stream_options.include_usage).
    const usage = fake.requests.findLast((r) => r.endpoint === "chat")?.usage;
    expect(reply.tokens).toEqual({
      input: usage?.prompt_tokens,
      output: usage?.completion_tokens,
      total: usage?.total_tokens,
    });
    expect(reply.tokens?.output).toBe(fakeTokens(deltas.join("")));
    expect(reply.model).toBe("gpt-4o-mini");
    expect(events.at(-1)?.data).toEqual({
      threadId: t.threadId,
      reply: {
        messageId: reply.messageId,
        sequenceNumber: 2,
        content: reply.content,
        model: reply.model,
        tokens: reply.tokens,
        latencyMs: reply.latencyMs,
        createdAt: reply.createdAt,
      },
      userMessage: { messageId: user.messageId, sequenceNumber: 1, createdAt: user.createdAt },
      factCount: 1,
      compacted: false,
    });

    const calls = fake.chatCalls();
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(calls[0].messages.at(-1)).toEqual({ role: "user", content: "Where did I say I live?" });
    expect(fake.embeddingCalls()).toHaveLength(1);
  });

  it("a model's lone surrogates reach the client as U+FFFD, as the reply is stored; a pair stays whole", async () => {
    const t = await tenantWithThread();
    // One chunk per word: the lone half is a chunk of its own, the pair is split across two.
    fake.onText(() => "bad \ud800 pair \ud83d\ude00 end \ud83d \ude00");
    const res = await t.chat({ content: "Say something odd", recall: false }, SSE);
    const deltas = (await readEvents(res))
      .filter((e) => e.event === "delta")
      .map((e) => (e.data as { content: string }).content);
    const streamed = deltas.join("");
    expect(streamed).toBe("bad \ufffd pair \ud83d\ude00 end \ufffd \ufffd");
    expect(deltas.every(storable)).toBe(true);
    const [, reply] = await t.messages();
    expect(reply.content).toBe(streamed);
  });

  it("a provider refusing the call is a plain JSON 500, and the user message stays", async () => {
    const t = await tenantWithThread();
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const res = await t.chat({ content: "Hello?" }, SSE);
    expect(res.status).toBe(500);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(FAILED);
    expect((await t.messages()).map((m) => m.role)).toEqual(["user"]);
  });

  it("a provider dying midway: an error event ends the stream and no reply is stored", async () => {
    const t = await tenantWithThread();
    fake.onText(() => "one two three four five six seven eight");
    fake.fail({ status: 500, times: 1, endpoint: "chat", midStream: true });
    const res = await t.chat({ content: "Count for me" }, SSE);
    expect(res.status).toBe(200);
    const events = await readEvents(res);
    const names = events.map((e) => e.event);
    expect(names[0]).toBe("start");
    expect(names.filter((n) => n === "delta").length).toBeGreaterThan(0);
    expect(names.at(-1)).toBe("error");
    expect(names).not.toContain("done");
    expect(events.at(-1)?.data).toEqual(FAILED);
    expect((await t.messages()).map((m) => [m.role, m.content])).toEqual([["user", "Count for me"]]);
  });

  it("a client that disconnects: the provider stream is closed and no reply is stored", async () => {
    const t = await tenantWithThread();
    fake.onText(() => Array.from({ length: 40 }, (_, i) => `w${i}`).join(" "));
    fake.streamChunkDelayMs = 20;
    const res = await t.chat({ content: "Talk a lot" }, SSE);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let seen = "";
    while (!seen.includes("event: delta")) {
      const { value, done } = await reader.read();
      expect(done).toBe(false);
      seen += new TextDecoder().decode(value);
    }
    await reader.cancel();

    await vi.waitFor(() => expect(fake.streamsClosedEarly).toBe(1), { timeout: 2000 });
    // Longer than the rest of the reply would have taken.
    await new Promise((r) => setTimeout(r, 100));
    expect((await t.messages()).map((m) => m.role)).toEqual(["user"]);
  });
});

describe("provider stream", () => {
  const llm = (timeoutMs = 5_000) =>
    createLlm(parseConfig({ OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: "32" }), {
      timeoutMs,
      maxRetries: 0,
    });

  it("yields the deltas, then the whole completion with the provider's usage", async () => {
    fake.onText(() => "alpha beta gamma");
    const stream = await llm().stream({ system: "s", messages: [{ role: "user", content: "u" }] });
    const deltas: string[] = [];
    for await (const d of stream) deltas.push(d);
    expect(deltas).toEqual(["alpha ", "beta ", "gamma"]);
    expect(stream.completion()).toEqual({
      text: "alpha beta gamma",
      model: "gpt-4o-mini",
      // "s" and "u" with their format tokens, 3 to prime; "alpha beta gamma" is 16 characters.
      tokens: { input: 13, output: 4, total: 17 },
    });
  });

  it("a failure before streaming rejects as a ProviderError", async () => {
    fake.fail({ status: 503, times: 1, endpoint: "chat" });
    const err = await llm()
      .stream({ system: "s", messages: [] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.message).toMatch(/^Model call failed: provider answered 503/);
  });

  it("a broken stream throws a ProviderError from the iteration, and completion() refuses", async () => {
    fake.onText(() => "alpha beta gamma delta");
    fake.fail({ status: 500, times: 1, endpoint: "chat", midStream: true });
    const stream = await llm().stream({ system: "s", messages: [] });
    const deltas: string[] = [];
    const err = await (async () => {
      for await (const d of stream) deltas.push(d);
    })().catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(deltas).toEqual(["alpha ", "beta "]);
    expect(() => stream.completion()).toThrow(ProviderError);
  });

  it("a stream that stops sending fails after the timeout instead of hanging", async () => {
    fake.onText(() => "slow words here");
    fake.streamChunkDelayMs = 400;
    const stream = await llm(150).stream({ system: "s", messages: [] });
    const err = await (async () => {
      for await (const _ of stream);
    })().catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.message).toMatch(/stalled/);
    // The stalled connection is closed, not left open; waited for here, so that its close (seen
    // by the server at its next chunk) is not counted in the next test.
    await vi.waitFor(() => expect(fake.streamsClosedEarly).toBe(1), { timeout: 2000 });
  });

  it("abort() ends the iteration quietly and closes the connection", async () => {
    fake.onText(() => "a b c d e f g h i j");
    fake.streamChunkDelayMs = 20;
    const stream = await llm().stream({ system: "s", messages: [] });
    const deltas: string[] = [];
    for await (const d of stream) {
      deltas.push(d);
      if (deltas.length === 2) stream.abort();
    }
    expect(deltas).toHaveLength(2);
    expect(() => stream.completion()).toThrow(ProviderError);
    await vi.waitFor(() => expect(fake.streamsClosedEarly).toBe(1), { timeout: 2000 });
  });
});

import { APICallError, type LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { generateText, jsonSchema, simulateReadableStream, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAM_RETRY_GRACE_MS, withMemory } from "../src/ai-sdk.js";
import { createMemoryClient, type MemoryClient, MemoryTimeoutError } from "../src/index.js";
import { type Host, startHost } from "./helpers/host.js";
import { startFaultProxy } from "./helpers/proxy.js";

/**
 * The AI SDK middleware with the SDK's own mock language model against the real service (the
 * Node.js host over HTTP): recall before the call, the block as a system message, the turn
 * appended after it (generateText and streamText, aborted streams included), and a recall that
 * fails or times out leaving the call to proceed without memory.
 */
let host: Host;
let key: string;
let memory: MemoryClient;
const DATASET = "ai-sdk-user";

beforeAll(async () => {
  host = await startHost();
  key = (await host.tenant()).key;
  memory = createMemoryClient({ baseUrl: host.url, apiKey: key });
  // An earlier conversation: ending it extracts "user lives in Lisbon" into the dataset.
  const earlier = await memory.threads.create({ dataset: DATASET });
  await memory.threads.addMessage(earlier.threadId, { role: "user", content: "I live in Lisbon." });
  await memory.threads.end(earlier.threadId);
  await host.runJobs();
});
afterAll(async () => {
  await host?.close();
});

const usage = {
  inputTokens: { total: 12, noCache: 12, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

function generating(text: string) {
  return new MockLanguageModelV4({
    modelId: "mock-chat",
    doGenerate: async () => ({
      content: [{ type: "text", text }],
      finishReason: { unified: "stop", raw: undefined },
      usage,
      warnings: [],
    }),
  });
}

/**
 * A model whose first call fails with a retryable provider error (`statusCode`, and its
 * `responseHeaders`), and which then answers `text`.
 */
function failingOnce(statusCode: number, text: string, responseHeaders?: Record<string, string>) {
  const answer = generating(text);
  let calls = 0;
  return new MockLanguageModelV4({
    modelId: "mock-chat",
    doGenerate: async (options) => {
      calls++;
      if (calls === 1) {
        throw new APICallError({
          message: `provider answered ${statusCode}`,
          url: "http://provider.test/v1/chat/completions",
          requestBodyValues: {},
          statusCode,
          responseHeaders,
          isRetryable: true,
        });
      }
      return answer.doGenerate(options);
    },
  });
}

function streaming(deltas: string[], chunkDelayInMs = 0) {
  const chunks: LanguageModelV4StreamPart[] = [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    ...deltas.map((delta) => ({ type: "text-delta" as const, id: "t", delta })),
    { type: "text-end", id: "t" },
    { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage },
  ];
  return new MockLanguageModelV4({
    modelId: "mock-chat",
    doStream: async () => ({ stream: simulateReadableStream({ chunks, chunkDelayInMs }) }),
  });
}

/** A stream that sends `text` and then fails (the provider's error part). */
function failingChunks(text: string): LanguageModelV4StreamPart[] {
  return [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: text },
    { type: "error", error: new Error("provider overloaded") },
  ];
}

/** A stream that answers `text` and finishes. */
function answerChunks(text: string): LanguageModelV4StreamPart[] {
  return [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: text },
    { type: "text-end", id: "t" },
    { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage },
  ];
}

/** The thread's messages once `count` have arrived (the append runs after the call returns). */
async function messagesOf(threadId: string, count: number) {
  for (let i = 0; i < 100; i++) {
    const { messages } = await memory.threads.messages(threadId, { order: "asc" });
    if (messages.length >= count) return messages;
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error(`thread ${threadId} never reached ${count} messages`);
}

const systemOf = (model: MockLanguageModelV4, kind: "generate" | "stream" = "generate") =>
  (kind === "generate" ? model.doGenerateCalls : model.doStreamCalls)[0].prompt
    .filter((m) => m.role === "system")
    .map((m) => m.content)
    .join("\n");

describe("generateText", () => {
  it("recalls for the user's message into a system message, then appends the turn", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const model = generating("You live in Lisbon.");
    const result = await generateText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      system: "You are a helpful assistant.",
      prompt: "Where do I live?",
    });
    expect(result.text).toBe("You live in Lisbon.");
    const prompt = model.doGenerateCalls[0].prompt;
    // The app's own system message first, then the recalled block, then the user's message.
    expect(prompt.map((m) => m.role)).toEqual(["system", "system", "user"]);
    expect(prompt[1].content).toContain("lives in Lisbon");

    const messages = await messagesOf(thread.threadId, 2);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "Where do I live?"],
      ["assistant", "You live in Lisbon."],
    ]);
    expect(messages[1]).toMatchObject({ model: "mock-chat", tokens: { input: 12, output: 5, total: 17 } });
  });

  it("with tools, appends the user message once and the answer after the tool results, in order", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    let step = 0;
    const model = new MockLanguageModelV4({
      modelId: "mock-chat",
      doGenerate: async () =>
        step++ === 0
          ? {
              content: [{ type: "tool-call", toolCallId: "call_1", toolName: "weather", input: '{"city":"Lisbon"}' }],
              finishReason: { unified: "tool-calls", raw: undefined },
              usage,
              warnings: [],
            }
          : {
              content: [{ type: "text", text: "It is sunny in Lisbon." }],
              finishReason: { unified: "stop", raw: undefined },
              usage,
              warnings: [],
            },
    });
    const result = await generateText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "What is the weather where I live?",
      tools: {
        weather: tool({
          inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } } }),
          execute: async ({ city }) => `sunny in ${city}`,
        }),
      },
      stopWhen: stepCountIs(3),
    });
    expect(result.text).toBe("It is sunny in Lisbon.");
    // The second step ends with the tool's result: it recalls again for the turn's question, and its
    // prompt (built afresh by the SDK) holds one block, not the first step's as well.
    expect(model.doGenerateCalls).toHaveLength(2);
    expect(model.doGenerateCalls[1].prompt.filter((m) => m.role === "system")).toHaveLength(1);
    const messages = await messagesOf(thread.threadId, 2);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "What is the weather where I live?"],
      ["assistant", "It is sunny in Lisbon."],
    ]);
  });

  it("recalls the conversation too: a message just added in another thread reaches the system block", async () => {
    const dataset = "ai-sdk-evidence";
    const earlier = await memory.threads.create({ dataset });
    await memory.threads.addMessage(earlier.threadId, {
      role: "user",
      content: "My sister Ana is visiting from Madrid on Friday.",
    });
    const thread = await memory.threads.create({ dataset });
    const model = generating("On Friday.");
    await generateText({
      model: withMemory(model, { client: memory, dataset, threadId: thread.threadId }),
      prompt: "When is my sister visiting?",
    });
    expect(systemOf(model)).toContain("# CONVERSATION");
    expect(systemOf(model)).toContain("user: My sister Ana is visiting from Madrid on Friday.");

    // `recall.include` is sent as given: without "messages" the block is the facts' alone, here none.
    const factsOnly = generating("I do not know.");
    await generateText({
      model: withMemory(factsOnly, { client: memory, dataset, recall: { include: [] } }),
      prompt: "When is my sister visiting?",
    });
    expect(factsOnly.doGenerateCalls[0].prompt.map((m) => m.role)).toEqual(["user"]);
  });

  it("does not wait for the append: the answer returns while the write is still in flight", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const slow = createMemoryClient({ baseUrl: proxy.url, apiKey: key });
      const thread = await memory.threads.create({ dataset: DATASET });
      proxy.fail("POST", `/v1/memory/working/threads/${thread.threadId}/messages:batch`, { kind: "delay", ms: 2500 });
      await generateText({
        model: withMemory(generating("Hi."), { client: slow, dataset: DATASET, threadId: thread.threadId }),
        prompt: "Hello",
      });
      // Answered while the proxy still holds the append.
      expect((await memory.threads.messages(thread.threadId)).total).toBe(0);
      expect(await messagesOf(thread.threadId, 2)).toHaveLength(2);
      // One recall before the model call, one batch after it: nothing else.
      expect(proxy.seen.map((s) => `${s.method} ${s.path.replace(thread.threadId, ":id")}`)).toEqual([
        "POST /v1/memory/recall",
        "POST /v1/memory/working/threads/:id/messages:batch",
      ]);
    } finally {
      await proxy.close();
    }
  });

  it("a recall that times out or fails leaves the call to proceed without memory, and reports it", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const flaky = createMemoryClient({ baseUrl: proxy.url, apiKey: key });
      const errors: [unknown, string][] = [];
      const options = {
        client: flaky,
        dataset: DATASET,
        recallTimeoutMs: 200,
        onMemoryError: (e: unknown, stage: string) => errors.push([e, stage]),
      };
      proxy.fail("POST", "/v1/memory/recall", { kind: "delay", ms: 2000 });
      const model = generating("I do not know.");
      const result = await generateText({ model: withMemory(model, options), prompt: "Where do I live?" });
      expect(result.text).toBe("I do not know.");
      expect(systemOf(model)).toBe("");
      expect(errors).toHaveLength(1);
      expect(errors[0][0]).toBeInstanceOf(MemoryTimeoutError);
      expect(errors[0][1]).toBe("recall");
      expect(result.warnings).toContainEqual({
        type: "other",
        message: "memory recall failed, answered without memory: The memory service did not answer within 200 ms",
      });

      proxy.fail("POST", "/v1/memory/recall", { kind: "status", status: 503 });
      const again = await generateText({ model: withMemory(generating("Still fine."), options), prompt: "Hi" });
      expect(again.text).toBe("Still fine.");
      expect(errors[1]).toMatchObject([{ status: 503 }, "recall"]);
      // Recall is not retried before a model call: one attempt each.
      expect(proxy.seen.filter((s) => s.path === "/v1/memory/recall")).toHaveLength(2);

      // The app's own handler throwing does not fail the call either.
      proxy.fail("POST", "/v1/memory/recall", { kind: "status", status: 503 });
      const throwing = withMemory(generating("Fine anyway."), {
        ...options,
        onMemoryError: () => {
          throw new Error("the app's logger is down");
        },
      });
      expect((await generateText({ model: throwing, prompt: "Hi" })).text).toBe("Fine anyway.");
    } finally {
      await proxy.close();
    }
  });
});

describe("generateText failing", () => {
  it("a model call that fails for good appends the user message alone, after the grace; one the SDK retries, once", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const failing = new MockLanguageModelV4({
      modelId: "mock-chat",
      doGenerate: async () => {
        throw new Error("provider down");
      },
    });
    await generateText({
      model: withMemory(failing, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "Remember I am vegan",
      maxRetries: 0,
    }).catch(() => {});
    await new Promise((r) => setTimeout(r, STREAM_RETRY_GRACE_MS));
    expect((await messagesOf(thread.threadId, 1)).map((m) => [m.role, m.content])).toEqual([
      ["user", "Remember I am vegan"],
    ]);

    const retried = await memory.threads.create({ dataset: DATASET });
    const flaky = failingOnce(503, "Noted.");
    const { text } = await generateText({
      model: withMemory(flaky, { client: memory, dataset: DATASET, threadId: retried.threadId }),
      prompt: "Remember I am vegan",
      maxRetries: 1,
    });
    expect(text).toBe("Noted.");
    await new Promise((r) => setTimeout(r, STREAM_RETRY_GRACE_MS + 500));
    expect((await messagesOf(retried.threadId, 2)).map((m) => [m.role, m.content])).toEqual([
      ["user", "Remember I am vegan"],
      ["assistant", "Noted."],
    ]);
  }, 40_000);
});

describe("streamText", () => {
  it("streams the model's reply unchanged and appends the turn when the stream finishes", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const model = streaming(["You ", "live ", "in ", "Lisbon."]);
    const result = streamText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "Where do I live?",
    });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    expect(text).toBe("You live in Lisbon.");
    expect(systemOf(model, "stream")).toContain("lives in Lisbon");
    const messages = await messagesOf(thread.threadId, 2);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "Where do I live?"],
      ["assistant", "You live in Lisbon."],
    ]);
    expect(messages[1].metadata).toEqual({ stopReason: "stop" });
  });

  it("aborted part-way: the user message and the partial reply are appended, marked aborted", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const controller = new AbortController();
    const result = streamText({
      model: withMemory(streaming(["one ", "two ", "three ", "four ", "five "], 40), {
        client: memory,
        dataset: DATASET,
        threadId: thread.threadId,
      }),
      prompt: "Count to five",
      abortSignal: controller.signal,
    });
    let text = "";
    try {
      for await (const delta of result.textStream) {
        text += delta;
        if (text === "one two ") controller.abort();
      }
    } catch {
      // streamText may end the loop with the abort; either way the stream stopped here.
    }
    const messages = await messagesOf(thread.threadId, 2);
    expect(messages[0]).toMatchObject({ role: "user", content: "Count to five" });
    expect(messages[1]).toMatchObject({ role: "assistant", metadata: { stopReason: "aborted" } });
    expect("one two three ".startsWith(messages[1].content)).toBe(true);
    expect(messages[1].content.startsWith("one two")).toBe(true);
  });

  it("a stream that fails part-way and is retried by the SDK (streamRetries) appends the turn once, with the retry's reply", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    let calls = 0;
    const model = new MockLanguageModelV4({
      modelId: "mock-chat",
      doStream: async () => {
        calls++;
        const chunks: LanguageModelV4StreamPart[] =
          calls === 1 ? failingChunks("Half an ans") : answerChunks("The full answer.");
        return { stream: simulateReadableStream({ chunks }) };
      },
    });
    const result = streamText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "What is the answer?",
      streamRetries: 1,
    });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    expect(calls).toBe(2);
    expect(text).toContain("The full answer.");
    const messages = await messagesOf(thread.threadId, 2);
    // Past the grace a held attempt would have been appended: nothing more comes.
    await new Promise((r) => setTimeout(r, STREAM_RETRY_GRACE_MS + 500));
    expect((await memory.threads.messages(thread.threadId, { order: "asc" })).messages).toHaveLength(2);
    expect(messages.map((m) => [m.role, m.content, m.metadata ?? null])).toEqual([
      ["user", "What is the answer?", null],
      ["assistant", "The full answer.", { stopReason: "stop" }],
    ]);
  }, 30_000);

  it("a stream that fails part-way without a retry appends the user message and the partial reply, marked error, after the grace", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const model = new MockLanguageModelV4({
      modelId: "mock-chat",
      doStream: async () => ({
        stream: simulateReadableStream({
          chunks: failingChunks("Half an ans"),
        }),
      }),
    });
    const result = streamText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "What is the answer?",
      onError: () => {},
    });
    for await (const _ of result.textStream) {
      // the partial text, then the error
    }
    // Held for a retry that does not come, then appended.
    await new Promise((r) => setTimeout(r, STREAM_RETRY_GRACE_MS));
    const messages = await messagesOf(thread.threadId, 2);
    expect(messages.map((m) => [m.role, m.content, m.metadata ?? null])).toEqual([
      ["user", "What is the answer?", null],
      ["assistant", "Half an ans", { stopReason: "error" }],
    ]);
  }, 30_000);

  it("a retry that fails before the model answers keeps the failed attempt's turn; a later turn does not overtake it", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    let calls = 0;
    const failing = failingChunks("Half an ans");
    const model = new MockLanguageModelV4({
      modelId: "mock-chat",
      doStream: async () => {
        calls++;
        if (calls === 1) return { stream: simulateReadableStream({ chunks: failing }) };
        if (calls === 2) throw new Error("provider down");
        return {
          stream: simulateReadableStream({
            chunks: answerChunks("Second answer."),
          }),
        };
      },
    });
    const wrapped = withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId });
    const first = streamText({ model: wrapped, prompt: "What is the answer?", streamRetries: 1, onError: () => {} });
    for await (const _ of first.textStream) {
      // the partial text, the error, the retry's failure
    }
    expect(calls).toBe(2);
    // The next turn, within the grace: the failed one goes first.
    const second = streamText({ model: wrapped, prompt: "And the second?" });
    for await (const _ of second.textStream) {
      // the answer
    }
    const messages = await messagesOf(thread.threadId, 4);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "What is the answer?"],
      ["assistant", "Half an ans"],
      ["user", "And the second?"],
      ["assistant", "Second answer."],
    ]);
  }, 30_000);

  it("a held turn goes to its own thread, not to the thread a later call names", async () => {
    const a = await memory.threads.create({ dataset: DATASET });
    const b = await memory.threads.create({ dataset: DATASET });
    let current = a.threadId;
    let calls = 0;
    const model = new MockLanguageModelV4({
      modelId: "mock-chat",
      doStream: async () => {
        calls++;
        const chunks: LanguageModelV4StreamPart[] = calls === 1 ? failingChunks("partial A") : answerChunks("answer B");
        return { stream: simulateReadableStream({ chunks }) };
      },
    });
    const wrapped = withMemory(model, { client: memory, dataset: DATASET, threadId: () => current });
    for await (const _ of streamText({ model: wrapped, prompt: "hi", onError: () => {} }).textStream) {
      // fails part-way
    }
    current = b.threadId;
    for await (const _ of streamText({ model: wrapped, prompt: "hi" }).textStream) {
      // the same words in another thread: not a retry of the first
    }
    expect((await messagesOf(b.threadId, 2)).map((m) => [m.role, m.content])).toEqual([
      ["user", "hi"],
      ["assistant", "answer B"],
    ]);
    // Another thread's turn does not release it: it waits out its grace for a retry of its own.
    expect((await memory.threads.messages(a.threadId)).messages).toEqual([]);
    await new Promise((r) => setTimeout(r, STREAM_RETRY_GRACE_MS));
    expect((await messagesOf(a.threadId, 2)).map((m) => [m.role, m.content])).toEqual([
      ["user", "hi"],
      ["assistant", "partial A"],
    ]);
  }, 30_000);

  it("aborted before any text: only the user message is appended", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const controller = new AbortController();
    const model = streaming(["late"], 300);
    const result = streamText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "Say something",
      abortSignal: controller.signal,
    });
    // Once the model has been called (recall is done), before its first chunk.
    const timer = setInterval(() => {
      if (model.doStreamCalls.length > 0) {
        clearInterval(timer);
        controller.abort();
      }
    }, 5);
    try {
      for await (const _ of result.textStream) {
        // nothing arrives before the abort
      }
    } catch {
      // the abort
    }
    const messages = await messagesOf(thread.threadId, 1);
    await new Promise((r) => setTimeout(r, 200));
    expect((await memory.threads.messages(thread.threadId)).messages.map((m) => m.role)).toEqual(["user"]);
    expect(messages[0].content).toBe("Say something");
  });

  it("a failed recall still streams, with the failure in the stream's warnings", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const client = createMemoryClient({ baseUrl: proxy.url, apiKey: key });
      proxy.fail("POST", "/v1/memory/recall", { kind: "reset" });
      const errors: string[] = [];
      const result = streamText({
        model: withMemory(streaming(["ok"]), {
          client,
          dataset: DATASET,
          onMemoryError: (_e, stage) => errors.push(stage),
        }),
        prompt: "Hi",
      });
      expect(await result.text).toBe("ok");
      expect(errors).toEqual(["recall"]);
      expect((await result.warnings)?.map((w) => w.type)).toContain("other");
    } finally {
      await proxy.close();
    }
  });
});

describe("retries and aborts the grace does not cover", () => {
  const rows = async (threadId: string) =>
    (await memory.threads.messages(threadId, { order: "asc" })).messages.map((m) => [m.role, m.content]);

  it("a retry the SDK sends after the grace (a 429's retry-after) appends its reply alone: the user message once", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    // Past the grace: the SDK waits for it before its retry.
    const model = failingOnce(429, "Noted.", { "retry-after": String(STREAM_RETRY_GRACE_MS / 1000 + 1) });
    const { text } = await generateText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "Remember I am vegan",
      maxRetries: 1,
    });
    expect(text).toBe("Noted.");
    expect((await messagesOf(thread.threadId, 2)).map((m) => [m.role, m.content])).toEqual([
      ["user", "Remember I am vegan"],
      ["assistant", "Noted."],
    ]);
    await new Promise((r) => setTimeout(r, 300));
    expect(await rows(thread.threadId)).toHaveLength(2);
  }, 40_000);

  it("another thread's turn ending while a stream's retry recalls does not append the held attempt", async () => {
    const proxy = await startFaultProxy(host.url);
    try {
      const client = createMemoryClient({ baseUrl: proxy.url, apiKey: key });
      const a = await memory.threads.create({ dataset: DATASET });
      const b = await memory.threads.create({ dataset: DATASET });
      const threads = [a.threadId, a.threadId, b.threadId];
      let calls = 0;
      const model = new MockLanguageModelV4({
        modelId: "mock-chat",
        doStream: async () => {
          calls++;
          if (calls === 1) {
            // The retry's recall is slow (once), and thread B's turn ends meanwhile.
            proxy.fail("POST", "/v1/memory/recall", { kind: "delay", ms: 1500 });
            return { stream: simulateReadableStream({ chunks: failingChunks("partial A") }) };
          }
          return { stream: simulateReadableStream({ chunks: answerChunks(`answer ${calls}`) }) };
        },
        doGenerate: async () => ({
          content: [{ type: "text", text: "answer B" }],
          finishReason: { unified: "stop", raw: undefined },
          usage,
          warnings: [],
        }),
      });
      const wrapped = withMemory(model, { client, dataset: DATASET, threadId: () => threads.shift() });
      const first = (async () => {
        let text = "";
        for await (const d of streamText({ model: wrapped, prompt: "Question A", streamRetries: 1 }).textStream)
          text += d;
        return text;
      })();
      await expect.poll(() => proxy.seen.filter((s) => s.path === "/v1/memory/recall").length).toBe(2);
      await generateText({ model: wrapped, prompt: "Question B" });
      expect(await first).toContain("answer 2");
      expect((await messagesOf(b.threadId, 2)).map((m) => [m.role, m.content])).toEqual([
        ["user", "Question B"],
        ["assistant", "answer B"],
      ]);
      expect((await messagesOf(a.threadId, 2)).map((m) => [m.role, m.content])).toEqual([
        ["user", "Question A"],
        ["assistant", "answer 2"],
      ]);
      await new Promise((r) => setTimeout(r, 300));
      expect(await rows(a.threadId)).toHaveLength(2);
    } finally {
      await proxy.close();
    }
  }, 40_000);

  it("aborted while the provider has not answered yet (the model was called): the user message is appended", async () => {
    const thread = await memory.threads.create({ dataset: DATASET });
    const controller = new AbortController();
    let called = false;
    const model = new MockLanguageModelV4({
      modelId: "mock-chat",
      // As a provider's fetch: its response is awaited, and the abort rejects it.
      doStream: async ({ abortSignal }) => {
        called = true;
        return new Promise((_, reject) =>
          abortSignal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")), {
            once: true,
          }),
        );
      },
    });
    const result = streamText({
      model: withMemory(model, { client: memory, dataset: DATASET, threadId: thread.threadId }),
      prompt: "Say something slowly",
      abortSignal: controller.signal,
      onError: () => {},
    });
    await expect.poll(() => called).toBe(true);
    controller.abort();
    let text = "";
    try {
      for await (const delta of result.textStream) text += delta;
    } catch {
      // the abort, as the SDK reports it
    }
    expect(text).toBe("");
    expect((await messagesOf(thread.threadId, 1)).map((m) => [m.role, m.content])).toEqual([
      ["user", "Say something slowly"],
    ]);
  }, 30_000);
});

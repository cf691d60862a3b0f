import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { parseConfig } from "../../lib/config";
import { createLlm, type ProviderCall } from "../../lib/llm/client";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";

/**
 * The provider client's meter (what the usage ledger records): one call per request the provider
 * answered, with the usage it reported, however many requests one method makes.
 */
let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI();
});
afterAll(() => fake.close());
beforeEach(() => fake.reset());

const llm = (env: Record<string, string> = {}) =>
  createLlm(
    parseConfig({ OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: "32", ...env }),
    { maxRetries: 0, timeoutMs: 5_000 },
  );

function meter() {
  const calls: ProviderCall[] = [];
  return { calls, meter: (call: ProviderCall) => calls.push(call) };
}

/** The fake's log as the meter should have heard it. */
const logged = () =>
  fake.requests.map((r) => ({
    kind: r.endpoint === "chat" ? "chat" : "embedding",
    inputTokens: r.usage?.prompt_tokens ?? null,
    totalTokens: r.usage?.total_tokens ?? null,
  }));

const Summary = z.object({ summary: z.string(), keyLearnings: z.array(z.string()) });

describe("the provider client's meter", () => {
  it("hears of each request a structured call makes in JSON mode, with its usage", async () => {
    fake.jsonSchema = "rejected";
    fake.invalidJsonAnswers = 1;
    fake.onStructured("episode_summary", () => ({ summary: "s", keyLearnings: [] }));
    const m = meter();
    await llm().structured({ name: "episode_summary", schema: Summary, system: "sys", user: "u", meter: m.meter });
    // Refused (400), then JSON mode with a broken answer, then the repair turn.
    expect(fake.requests).toHaveLength(3);
    expect(m.calls.map((c) => c.outcome)).toEqual(["error", "ok", "ok"]);
    expect(m.calls.map(({ kind, inputTokens, totalTokens }) => ({ kind, inputTokens, totalTokens }))).toEqual(logged());
    expect(m.calls[1]).toMatchObject({ model: "gpt-4o-mini", outputTokens: fake.requests[1].usage?.completion_tokens });
  });

  it("hears of an embedding asked again without dimensions as two calls", async () => {
    // Like vLLM serving a model of one size that is not Matryoshka.
    fake.rejectDimensions = true;
    fake.nativeEmbeddingSize = 32;
    const m = meter();
    await llm().embed(["I live in Lisbon", "I like tea"], m.meter);
    expect(m.calls.map((c) => [c.kind, c.outcome])).toEqual([
      ["embedding", "error"],
      ["embedding", "ok"],
    ]);
    // 16 and 10 characters: 4 and 3 tokens as the fake counts them.
    expect(m.calls[1]).toMatchObject({ inputTokens: 7, outputTokens: null, totalTokens: 7 });
  });

  it("hears of a streamed reply once, when it ends, with the usage chunk's counts", async () => {
    fake.onText(() => "alpha beta gamma");
    const m = meter();
    const stream = await llm().stream({ system: "s", messages: [{ role: "user", content: "u" }], meter: m.meter });
    expect(m.calls).toEqual([]);
    for await (const _ of stream);
    expect(m.calls).toEqual([
      { kind: "chat", model: "gpt-4o-mini", inputTokens: 13, outputTokens: 4, totalTokens: 17, outcome: "ok" },
    ]);
  });

  it("hears of a stream broken midway as an error without counts", async () => {
    fake.fail({ status: 500, times: 1, midStream: true });
    const m = meter();
    const stream = await llm().stream({ system: "s", messages: [{ role: "user", content: "u" }], meter: m.meter });
    await expect(
      (async () => {
        for await (const _ of stream);
      })(),
    ).rejects.toThrow();
    expect(m.calls).toEqual([
      {
        kind: "chat",
        model: "gpt-4o-mini",
        inputTokens: null,
        outputTokens: null,
        totalTokens: null,
        outcome: "error",
        // Why, for metrics and traces (the ledger keeps the outcome only).
        error: expect.objectContaining({
          name: "ProviderError",
          message: expect.stringMatching(/^Model stream failed/),
        }),
      },
    ]);
  });

  it("hears of each attempt the SDK retried as a call of its own: the fake's log and the meter agree", async () => {
    const retrying = () =>
      createLlm(parseConfig({ OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: "32" }), {
        maxRetries: 2,
        timeoutMs: 5_000,
      });
    const retried = { inputTokens: null, outputTokens: null, totalTokens: null, outcome: "error", retried: true };
    const m = meter();
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    await retrying().complete({ system: "s", messages: [{ role: "user", content: "u" }], meter: m.meter });
    fake.fail({ status: 503, times: 2, endpoint: "embeddings" });
    await retrying().embed(["I live in Lisbon"], m.meter);
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const stream = await retrying().stream({ system: "s", messages: [{ role: "user", content: "u" }], meter: m.meter });
    for await (const _ of stream);
    // Every attempt fails: three requests, three calls, the last the method's own failure.
    fake.fail({ status: 500, times: 3, endpoint: "chat" });
    await expect(
      retrying().complete({ system: "s", messages: [{ role: "user", content: "u" }], meter: m.meter }),
    ).rejects.toThrow(/500/);

    expect(fake.requests).toHaveLength(10);
    expect(m.calls.map(({ kind, inputTokens, totalTokens }) => ({ kind, inputTokens, totalTokens }))).toEqual(logged());
    expect(m.calls.map((c) => [c.kind, c.outcome, c.retried ?? false])).toEqual([
      ["chat", "error", true],
      ["chat", "ok", false],
      ["embedding", "error", true],
      ["embedding", "error", true],
      ["embedding", "ok", false],
      ["chat", "error", true],
      ["chat", "ok", false],
      ["chat", "error", true],
      ["chat", "error", true],
      ["chat", "error", false],
    ]);
    expect(m.calls[0]).toEqual({ kind: "chat", model: "gpt-4o-mini", ...retried });
  }, 30_000);

  it("hears of a 200 that is not the answer asked for as an error, and says so readably", async () => {
    type Run = (meter: (call: ProviderCall) => void) => Promise<unknown>;
    const complete: Run = (m) => llm().complete({ system: "s", messages: [{ role: "user", content: "hi" }], meter: m });
    const structured: Run = (m) =>
      llm().structured({ name: "episode_summary", schema: Summary, system: "s", user: "u", meter: m });
    const embed: Run = (m) => llm().embed(["I live in Lisbon"], m);
    const cases = [
      ["chat", "no-choices", complete, "Model call returned no content"],
      ["chat", "text", complete, "Model call returned no content"],
      ["chat", "no-choices", structured, "Model call (episode_summary) returned no content"],
      ["embeddings", "no-choices", embed, "Embedding call returned 0 vectors of size undefined (expected 1 of 32)"],
      ["embeddings", "text", embed, "Embedding call returned 0 vectors of size undefined (expected 1 of 32)"],
    ] as const;
    for (const [endpoint, malformed, run, message] of cases) {
      fake.reset();
      fake.fail({ status: 200, times: 1, endpoint, malformed });
      const m = meter();
      const error = await run(m.meter).then(
        () => "no error",
        (err: Error) => err.message,
      );
      expect({ endpoint, malformed, error, outcomes: m.calls.map((c) => c.outcome) }).toEqual({
        endpoint,
        malformed,
        error: message,
        outcomes: ["error"],
      });
    }
  });

  it("counts a provider that reports no usage as unknown (null), not zero", async () => {
    fake.usage = "none";
    const m = meter();
    await llm().complete({ system: "s", messages: [{ role: "user", content: "u" }], meter: m.meter });
    expect(m.calls).toEqual([
      { kind: "chat", model: "gpt-4o-mini", inputTokens: null, outputTokens: null, totalTokens: null, outcome: "ok" },
    ]);
  });

  it("hears of nothing when no provider is configured (no call was made)", async () => {
    const m = meter();
    await expect(llm({ OPENAI_API_KEY: "", OPENAI_BASE_URL: "" }).embed(["x"], m.meter)).rejects.toThrow(
      /No model provider/,
    );
    expect(m.calls).toEqual([]);
  });
});

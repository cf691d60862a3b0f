import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { parseConfig } from "../lib/config";
import { createLlm, ProviderError } from "../lib/llm/client";
import { type FakeOpenAI, fakeEmbedding, startFakeOpenAI } from "./helpers/fake-openai";

let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI();
});
afterAll(() => fake.close());
beforeEach(() => fake.reset());

const config = (env: Record<string, string> = {}) =>
  parseConfig({ OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: fake.url, EMBEDDING_DIMENSIONS: "32", ...env });

const Summary = z.object({ summary: z.string(), keyLearnings: z.array(z.string()) });

describe("provider client", () => {
  it("sends a strict json_schema and parses the answer", async () => {
    fake.onStructured("episode_summary", () => ({ summary: "User likes tea", keyLearnings: ["tea"] }));
    const llm = createLlm(config());
    const out = await llm.structured({ name: "episode_summary", schema: Summary, system: "sys", user: "transcript" });
    expect(out).toEqual({ summary: "User likes tea", keyLearnings: ["tea"] });
    const [call] = fake.chatCalls();
    expect(call.model).toBe("gpt-4o-mini");
    expect(call.response_format?.type).toBe("json_schema");
    expect(call.response_format?.json_schema?.strict).toBe(true);
    expect(call.response_format?.json_schema?.schema).toMatchObject({
      type: "object",
      required: ["summary", "keyLearnings"],
      additionalProperties: false,
    });
  });

  it("embeds a batch in one call with the configured model and dimensions", async () => {
    const llm = createLlm(config({ EMBEDDING_MODEL: "emb-small" }));
    const vectors = await llm.embed(["I live in Lisbon", "I like tea"]);
    expect(vectors).toEqual([fakeEmbedding("I live in Lisbon", 32), fakeEmbedding("I like tea", 32)]);
    expect(fake.embeddingCalls()).toHaveLength(1);
    expect(fake.embeddingCalls()[0]).toMatchObject({ model: "emb-small", dimensions: 32 });
  });

  it("retries 429 and 5xx with backoff, then succeeds", async () => {
    fake.fail({ status: 429, times: 1 });
    fake.fail({ status: 503, times: 1 });
    const llm = createLlm(config(), { maxRetries: 2 });
    await expect(llm.embed(["x"])).resolves.toHaveLength(1);
    expect(fake.embeddingCalls()).toHaveLength(3);
  });

  it("surfaces a persistent failure as a readable ProviderError", async () => {
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY });
    const llm = createLlm(config(), { maxRetries: 1 });
    const err = await llm.embed(["x"]).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.message).toMatch(/^Embedding call failed: provider answered 500/);
    expect(fake.embeddingCalls()).toHaveLength(2);
  });

  it("times out a hanging provider", async () => {
    fake.fail({ status: 200, times: 1, hang: true });
    const llm = createLlm(config(), { timeoutMs: 200, maxRetries: 0 });
    await expect(llm.embed(["x"])).rejects.toThrow(/Embedding call failed: .*timed out/i);
  });

  it("rejects an answer that does not match the schema", async () => {
    fake.onStructured("episode_summary", () => ({ summary: 42 }));
    const llm = createLlm(config());
    await expect(llm.structured({ name: "episode_summary", schema: Summary, system: "s", user: "u" })).rejects.toThrow(
      "does not match the schema",
    );
  });

  it("fails visibly without a key and sends nothing", async () => {
    const llm = createLlm(config({ OPENAI_API_KEY: "" }));
    await expect(llm.embed(["x"])).rejects.toThrow("OPENAI_API_KEY is not configured");
    expect(fake.requests).toHaveLength(0);
  });
});

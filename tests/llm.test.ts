import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { parseConfig, providerConfigured } from "../lib/config";
import { NO_PROVIDER_MESSAGE, NoProviderError, ProviderError } from "../lib/errors";
import { createLlm, EMBEDDING_PROBE_TEXT, PLACEHOLDER_API_KEY, strictJsonSchema } from "../lib/llm/client";
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

  it("fails visibly without a key or a base URL and sends nothing", async () => {
    const llm = createLlm(config({ OPENAI_API_KEY: "", OPENAI_BASE_URL: "" }));
    const err = await llm.embed(["x"]).catch((e) => e);
    expect(err).toBeInstanceOf(NoProviderError);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.message).toBe(NO_PROVIDER_MESSAGE);
    expect(err.message).toMatch(/OPENAI_API_KEY.*OPENAI_BASE_URL/);
    await expect(llm.complete({ system: "s", messages: [] })).rejects.toThrow(NO_PROVIDER_MESSAGE);
    expect(fake.requests).toHaveLength(0);
    expect(providerConfigured(config({ OPENAI_API_KEY: "", OPENAI_BASE_URL: "" }))).toBe(false);
  });

  it("a base URL without a key is a configured provider: the SDK sends a placeholder key", async () => {
    const seen: (string | null)[] = [];
    const recordingFetch: typeof fetch = (input, init) => {
      seen.push(new Headers(init?.headers).get("authorization"));
      return fetch(input, init);
    };
    const cfg = config({ OPENAI_API_KEY: "" });
    expect(providerConfigured(cfg)).toBe(true);
    const llm = createLlm(cfg, { fetch: recordingFetch });
    await expect(llm.embed(["x"])).resolves.toHaveLength(1);
    expect(seen).toEqual([`Bearer ${PLACEHOLDER_API_KEY}`]);
    // A key alone (the OpenAI API) is configured too.
    expect(providerConfigured(parseConfig({ OPENAI_API_KEY: "sk-test" }))).toBe(true);
  });

  it("embeddingSize: one probe call, the size the model returns (no size check)", async () => {
    const llm = createLlm(config({ EMBEDDING_MODEL: "emb-small" }));
    expect(await llm.embeddingSize()).toBe(32);
    expect(fake.embeddingCalls()).toEqual([
      expect.objectContaining({ model: "emb-small", input: [EMBEDDING_PROBE_TEXT], dimensions: 32 }),
    ]);
    // A model with one size that ignores `dimensions` (Ollama's nomic-embed-text: 768).
    fake.nativeEmbeddingSize = 768;
    expect(await llm.embeddingSize()).toBe(768);
    await expect(llm.embed(["x"])).rejects.toThrow("Embedding call returned 1 vectors of size 768 (expected 1 of 32)");
  });
});

describe("embeddings on servers that refuse `dimensions`", () => {
  it("a 400 to dimensions (vLLM, a model that is not Matryoshka): asked again without it, then never sent", async () => {
    fake.rejectDimensions = true;
    fake.nativeEmbeddingSize = 32;
    const llm = createLlm(config());
    expect(await llm.embed(["I like tea"])).toEqual([fakeEmbedding("I like tea", 32)]);
    expect(await llm.embeddingSize()).toBe(32);
    expect(fake.embeddingCalls().map((c) => c.dimensions)).toEqual([32, undefined, undefined]);
  });

  it("the model's own size is still checked", async () => {
    fake.rejectDimensions = true;
    fake.nativeEmbeddingSize = 1024;
    const llm = createLlm(config());
    await expect(llm.embed(["x"])).rejects.toThrow("Embedding call returned 1 vectors of size 1024 (expected 1 of 32)");
    expect(await llm.embeddingSize()).toBe(1024);
  });
});

describe("structured output on servers without JSON schema", () => {
  const ask = (llm: ReturnType<typeof createLlm>) =>
    llm.structured({ name: "episode_summary", schema: Summary, system: "Summarise.", user: "transcript" });
  const answer = { summary: "User likes tea", keyLearnings: ["tea"] };

  it("a 400 for json_schema: JSON mode with the schema in the prompt, and later calls go there directly", async () => {
    fake.jsonSchema = "rejected";
    fake.onStructured("episode_summary", () => answer);
    const llm = createLlm(config());
    expect(await ask(llm)).toEqual(answer);
    const calls = fake.chatCalls();
    expect(calls.map((c) => c.response_format?.type)).toEqual(["json_schema", "json_object"]);
    const system = calls[1].messages[0];
    expect(system.role).toBe("system");
    expect(system.content).toMatch(/^Summarise\.\n\nAnswer with one JSON object and nothing else/);
    expect(system.content).toContain(JSON.stringify(strictJsonSchema(Summary)));
    expect(calls[1].messages[1]).toEqual({ role: "user", content: "transcript" });

    expect(await ask(llm)).toEqual(answer);
    expect(fake.chatCalls().map((c) => c.response_format?.type)).toEqual(["json_schema", "json_object", "json_object"]);
    expect(fake.chatCalls("episode_summary")).toHaveLength(3);
  });

  it("json_schema accepted but the answer is not JSON: asked again in JSON mode", async () => {
    fake.onStructured("episode_summary", () => answer);
    fake.invalidJsonAnswers = 1;
    const llm = createLlm(config());
    expect(await ask(llm)).toEqual(answer);
    expect(fake.chatCalls().map((c) => c.response_format?.type)).toEqual(["json_schema", "json_object"]);
    // Not remembered: the server does support json_schema.
    expect(await ask(llm)).toEqual(answer);
    expect(fake.chatCalls().at(-1)?.response_format?.type).toBe("json_schema");
  });

  it("invalid JSON, then valid: one repair turn sends the answer and the error back", async () => {
    fake.jsonSchema = "rejected";
    fake.onStructured("episode_summary", () => answer);
    fake.invalidJsonAnswers = 1;
    const llm = createLlm(config());
    expect(await ask(llm)).toEqual(answer);
    const calls = fake.chatCalls();
    expect(calls.map((c) => c.response_format?.type)).toEqual(["json_schema", "json_object", "json_object"]);
    const repair = calls[2].messages;
    expect(repair).toHaveLength(4);
    expect(repair[2].role).toBe("assistant");
    expect(repair[2].content).toMatch(/^Sure! Here is the JSON: \{/);
    expect(repair[3].role).toBe("user");
    expect(repair[3].content).toMatch(/^That answer is not valid: it is not valid JSON \(/);
  });

  it("JSON that does not match the schema, then a match: repaired with the validation issues", async () => {
    fake.jsonSchema = "rejected";
    let n = 0;
    fake.onStructured("episode_summary", () => (n++ === 0 ? { summary: 42, keyLearnings: [] } : answer));
    const llm = createLlm(config());
    expect(await ask(llm)).toEqual(answer);
    const repair = fake.chatCalls().at(-1)?.messages.at(-1)?.content;
    expect(repair).toMatch(/it does not match the schema \(summary: .*expected string/i);
  });

  it("still invalid after the repair: a readable ProviderError", async () => {
    fake.jsonSchema = "rejected";
    fake.onStructured("episode_summary", () => answer);
    fake.invalidJsonAnswers = 2;
    const llm = createLlm(config());
    const err = await ask(llm).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.message).toMatch(
      /^Model call \(episode_summary\) returned invalid JSON in JSON mode, also after one repair: it is not valid JSON/,
    );
    expect(fake.chatCalls()).toHaveLength(3);

    fake.onStructured("episode_summary", () => ({ summary: "no learnings" }));
    const mismatch = await ask(llm).catch((e) => e);
    expect(mismatch.message).toMatch(
      /^Model call \(episode_summary\) returned JSON that does not match the schema in JSON mode, also after one repair: .*keyLearnings/,
    );
  });

  it("a server that refuses JSON mode too: the call fails with the provider's answer", async () => {
    fake.jsonSchema = "rejected";
    fake.fail({ status: 400, times: 2, endpoint: "chat" });
    const llm = createLlm(config());
    await expect(ask(llm)).rejects.toThrow(/^Model call \(episode_summary\) failed: provider answered 400/);
    expect(fake.chatCalls().map((c) => c.response_format?.type)).toEqual(["json_schema", "json_object"]);
  });
});

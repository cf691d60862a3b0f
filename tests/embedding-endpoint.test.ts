import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { embeddingsConfigured, parseConfig, providerConfigured } from "../lib/config";
import { NoProviderError } from "../lib/errors";
import { runDueJobs } from "../lib/jobs/runner";
import { createLlm, PLACEHOLDER_API_KEY } from "../lib/llm/client";
import { echoSummary } from "./episodic-fixtures";
import { TEST_EMBEDDING_DIMENSIONS } from "./helpers/constants";
import { type FakeOpenAI, startFakeOpenAI } from "./helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "./helpers/service";
import { fact } from "./semantic-fixtures";

/**
 * EMBEDDING_BASE_URL and EMBEDDING_API_KEY: chat on one OpenAI-compatible server, embeddings on
 * another (vLLM and llama.cpp serve one model per server), each server asserted to get only its
 * own calls, with its own key.
 */
let chatServer: FakeOpenAI;
let embeddingServer: FakeOpenAI;
beforeAll(async () => {
  [chatServer, embeddingServer] = await Promise.all([startFakeOpenAI(), startFakeOpenAI()]);
});
afterAll(async () => {
  await Promise.all([chatServer?.close(), embeddingServer?.close()]);
});
beforeEach(() => {
  chatServer.reset();
  embeddingServer.reset();
});

const endpointsOf = (fake: FakeOpenAI) => [...new Set(fake.requests.map((r) => r.endpoint))];
const keysOf = (fake: FakeOpenAI) => [...new Set(fake.requests.map((r) => r.authorization))];

describe("a separate embedding server, through the whole service", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await createTestService({
      provider: chatServer,
      manualTime: true,
      env: { EMBEDDING_BASE_URL: embeddingServer.url, EMBEDDING_API_KEY: "embedding-key" },
    });
  });
  afterAll(() => svc?.close());

  it("episodes, facts, recall, episode search and chat: every chat call to one, every embedding to the other", async () => {
    chatServer.onStructured("episode_summary", echoSummary);
    chatServer.onStructured("fact_extraction", () => ({
      facts: [fact("lives_in", "Lisbon", "I moved to Lisbon last spring.")],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    }));
    const t = await newTenant(svc, "split");
    const created = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "user-42" } });
    const { threadId } = (await created.json()) as { threadId: string };
    for (const [role, content] of [
      ["user", "I moved to Lisbon last spring."],
      ["assistant", "How do you like it?"],
    ]) {
      const res = await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role, content },
      });
      expect(res.status).toBe(201);
    }
    expect((await svc.request(`/v1/threads/${threadId}/end`, { method: "POST", token: t.key })).status).toBe(200);
    await runDueJobs(svc.deps);

    const recalled = await svc.request("/v1/memory/recall", {
      method: "POST",
      token: t.key,
      json: { dataset: "user-42", query: "Where does the user live?" },
    });
    expect(await recalled.json()).toMatchObject({ factCount: 1, context: expect.stringMatching(/Lisbon/) });
    const searched = await svc.request("/v1/memory/episodic/datasets/user-42/episodes/search?q=Lisbon", {
      token: t.key,
    });
    expect(searched.status).toBe(200);
    expect(((await searched.json()) as { episodes: unknown[] }).episodes).toHaveLength(1);
    const chat = await svc.request(`/v1/memory/working/threads/${threadId}/chat`, {
      method: "POST",
      token: t.key,
      json: { content: "Where do I live?" },
    });
    expect(chat.status).toBe(200);

    // Summary, extraction and the chat reply went to the chat server, with OPENAI_API_KEY.
    expect(chatServer.chatCalls("episode_summary")).toHaveLength(1);
    expect(chatServer.chatCalls("fact_extraction")).toHaveLength(1);
    expect(endpointsOf(chatServer)).toEqual(["chat"]);
    expect(keysOf(chatServer)).toEqual(["Bearer test-key"]);
    // The summary's, the facts', recall's query and the search's embeddings to the other, with its own key.
    expect(endpointsOf(embeddingServer)).toEqual(["embeddings"]);
    expect(keysOf(embeddingServer)).toEqual(["Bearer embedding-key"]);
    const inputs = embeddingServer.embeddingCalls().flatMap((c) => c.input);
    expect(inputs).toEqual(expect.arrayContaining(["Where does the user live?", "Lisbon", "Where do I live?"]));
    expect(embeddingServer.embeddingCalls().every((c) => c.dimensions === TEST_EMBEDDING_DIMENSIONS)).toBe(true);
  });
});

describe("EMBEDDING_BASE_URL and EMBEDDING_API_KEY default to the chat's", () => {
  const env = { EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS) };

  it("unset: embeddings go to OPENAI_BASE_URL with OPENAI_API_KEY", async () => {
    const llm = createLlm(parseConfig({ ...env, OPENAI_BASE_URL: chatServer.url, OPENAI_API_KEY: "chat-key" }));
    await llm.embed(["tea"]);
    expect(chatServer.requests).toMatchObject([{ endpoint: "embeddings", authorization: "Bearer chat-key" }]);
  });

  it("only the URL set: its calls carry OPENAI_API_KEY", async () => {
    const config = parseConfig({
      ...env,
      OPENAI_BASE_URL: chatServer.url,
      OPENAI_API_KEY: "chat-key",
      EMBEDDING_BASE_URL: embeddingServer.url,
    });
    await createLlm(config).embed(["tea"]);
    expect(chatServer.requests).toEqual([]);
    expect(embeddingServer.requests).toMatchObject([{ endpoint: "embeddings", authorization: "Bearer chat-key" }]);
  });

  it("an embedding server alone (no chat provider): embeddings work, chat calls are the NoProviderError", async () => {
    const config = parseConfig({ ...env, EMBEDDING_BASE_URL: embeddingServer.url });
    expect(providerConfigured(config)).toBe(false);
    expect(embeddingsConfigured(config)).toBe(true);
    const llm = createLlm(config, { maxRetries: 0 });
    await expect(llm.embed(["tea"])).resolves.toHaveLength(1);
    expect(embeddingServer.requests).toMatchObject([
      { endpoint: "embeddings", authorization: `Bearer ${PLACEHOLDER_API_KEY}` },
    ]);
    await expect(llm.complete({ system: "s", messages: [{ role: "user", content: "hi" }] })).rejects.toBeInstanceOf(
      NoProviderError,
    );
  });

  it("blank values count as unset", () => {
    const config = parseConfig({
      ...env,
      OPENAI_BASE_URL: "http://chat",
      EMBEDDING_BASE_URL: " ",
      EMBEDDING_API_KEY: "",
    });
    expect(config.embeddings).toEqual({ baseUrl: "http://chat", apiKey: undefined });
  });
});

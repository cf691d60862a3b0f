import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { manualClock } from "../../lib/clock";
import { rowsOf } from "../../lib/db/rows";
import { runDueJobs } from "../../lib/jobs/runner";
import { TRANSCRIPT_BUDGET_CHARS } from "../../lib/llm/transcript";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * A message longer than the chat model's window (a pasted log: a message may be 1 MB) reaches the
 * model cut to fit (lib/llm/transcript.ts), and a model with a smaller window than the default
 * budget assumes is asked again with less: compaction, the episode's summary and its fact
 * extraction, and chat each go on instead of being refused on every try. A fact the embedding
 * model refuses whole is embedded by its head.
 */

let svc: TestService;
let fake: FakeOpenAI;
let clock: ReturnType<typeof manualClock>;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake, manualTime: true });
  clock = svc.clock as ReturnType<typeof manualClock>;
  clock.set(new Date("2026-06-01T12:00:00.000Z"));
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.clearFailures();
  fake.onText(() => "SUMMARY");
  fake.onStructured("episode_summary", () => ({ summary: "an episode", keyLearnings: [] }));
  fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
});

// 400,000 characters: 100,000 tokens (fakeTokens), over the windows below and the default budget.
const HUGE = `Here is my server log: ${"GET /index.html 200 0.003s ".repeat(15_000)}`.slice(0, 400_000);

/** The fact the scripted extraction proposes from "I live in Lisbon.". */
const LIVES_IN_LISBON = {
  subject: "user",
  predicate: "lives_in",
  object: "Lisbon",
  objectIsEntity: true,
  confidence: 0.9,
  sourceQuote: "I live in Lisbon.",
  validAt: null,
};

async function tenant() {
  const t = await newTenant(svc, `window-${randomUUID().slice(0, 6)}`);
  const post = (path: string, json?: unknown) => svc.request(path, { method: "POST", token: t.key, json });
  return {
    ...t,
    post,
    async thread() {
      const res = await post("/v1/threads", { dataset: "ds" });
      expect(res.status).toBe(201);
      return ((await res.json()) as { threadId: string }).threadId;
    },
    async say(threadId: string, content: string, role = "user") {
      const res = await post(`/v1/memory/working/threads/${threadId}/messages`, { role, content });
      expect(res.status).toBe(201);
      return (await res.json()) as { compacted: boolean };
    },
  };
}

const promptLength = (c: { messages: { content: string }[] }) => c.messages.reduce((n, m) => n + m.content.length, 0);
const longestPrompt = () => Math.max(...fake.chatCalls().map(promptLength));

describe("a message over the chat model's window", () => {
  it("compaction folds it cut to its head, inside the budget, and with a smaller window asks again with less", async () => {
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "hello");
    await t.say(th, HUGE);
    for (let i = 3; i <= 19; i++) await t.say(th, `short message ${i}`, i % 2 ? "user" : "assistant");
    expect((await t.say(th, "the twentieth")).compacted).toBe(true);
    expect(longestPrompt()).toBeLessThan(TRANSCRIPT_BUDGET_CHARS + 2_000);

    // A model with an 8,000-token window (32,000 characters): refused at 96,000 and 48,000, folded at 24,000.
    const small = await t.thread();
    fake.reset();
    fake.onText(() => "SUMMARY");
    fake.maxPromptTokens = 8_000;
    await t.say(small, HUGE);
    for (let i = 2; i <= 13; i++) await t.say(small, `x${i} ${"word ".repeat(1_000)}`);
    const res = await t.post(`/v1/memory/working/threads/${small}/compact`);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({ compactedCount: 7, fromSequence: 1, toSequence: 7 });
    expect(fake.chatCalls()).toHaveLength(3);
    expect(fake.chatCalls().map((c) => promptLength(c) < TRANSCRIPT_BUDGET_CHARS / 4 + 2_000)).toEqual([
      false,
      false,
      true,
    ]);
  });

  it("an episode holding it is summarised and its facts extracted, with a model of a smaller window too", async () => {
    fake.maxPromptTokens = 8_000;
    fake.onStructured("fact_extraction", () => ({
      facts: [LIVES_IN_LISBON],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    }));
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "I live in Lisbon.");
    await t.say(th, HUGE);
    await t.say(th, "I work as a nurse.");
    const end = await t.post(`/v1/threads/${th}/end`);
    const { episodeId } = (await end.json()) as { episodeId: string };
    await runDueJobs(svc.deps);
    const [episode] = rowsOf<{ status: string; semantic_status: string }>(
      await svc.deps.db.execute(sql`SELECT status, semantic_status FROM episodes WHERE id = ${episodeId}`),
    );
    expect(episode).toEqual({ status: "completed", semantic_status: "completed" });
    const facts = rowsOf<{ object: string }>(
      await svc.deps.db.execute(sql`SELECT object FROM facts WHERE episode_id = ${episodeId}`),
    );
    expect(facts).toEqual([{ object: "Lisbon" }]);
    // Refused at 96,000 and 48,000 characters, accepted at 24,000: no JSON-mode retry of a refusal for length.
    expect(fake.chatCalls("episode_summary")).toHaveLength(3);
    expect(fake.chatCalls("fact_extraction")).toHaveLength(3);
  });

  it("chat replies with it in the window, cut to its head", async () => {
    fake.maxPromptTokens = 30_000;
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, HUGE);
    const res = await t.post(`/v1/memory/working/threads/${th}/chat`, {
      content: "what did the log say?",
      recall: false,
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const sent = fake.chatCalls().at(-1)?.messages ?? [];
    expect(sent.some((m) => m.content.startsWith("Here is my server log: GET /index.html"))).toBe(true);
    expect(sent.at(-1)?.content).toBe("what did the log say?");
  });
});

describe("a summary the embedding model refuses whole", () => {
  it("is embedded by its head: the episode completes", async () => {
    const summary = `The user talked about sailing. ${"They described every harbour in detail. ".repeat(30)}`;
    fake.onStructured("episode_summary", () => ({ summary, keyLearnings: [] }));
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "I sail every weekend.");
    fake.maxInputTokens = 200;
    const end = await t.post(`/v1/threads/${th}/end`);
    const { episodeId } = (await end.json()) as { episodeId: string };
    await runDueJobs(svc.deps);
    const [episode] = rowsOf<{ status: string; embedded: boolean }>(
      await svc.deps.db.execute(
        sql`SELECT status, embedding IS NOT NULL AS embedded FROM episodes WHERE id = ${episodeId}`,
      ),
    );
    expect(episode).toEqual({ status: "completed", embedded: true });
    expect(fake.embeddingCalls().map((c) => c.input)).toContainEqual([summary.slice(0, 500)]);
  });
});

describe("an episode search longer than the embedding model's window", () => {
  it("is embedded by its head: 200, not the 500 of a failed embedding", async () => {
    const t = await tenant();
    fake.maxInputTokens = 200;
    const q = "harbour ".repeat(124).trim(); // 991 characters: 248 tokens
    const res = await svc.request(`/v1/memory/episodic/datasets/ds/episodes/search?q=${encodeURIComponent(q)}`, {
      token: t.key,
    });
    expect(res.status, await res.clone().text()).toBe(200);
    // The query, the probe text (the model takes a text of its own), the head.
    expect(fake.embeddingCalls().map((c) => c.input[0].length)).toEqual([991, 20, 500]);
  });
});

describe("a fact the embedding model refuses whole", () => {
  it("is embedded by its head: the episode's facts are kept", async () => {
    const long = `my favourite poem, which goes ${"roses are red violets are blue ".repeat(40)}`.trim();
    fake.onStructured("fact_extraction", () => ({
      facts: [
        LIVES_IN_LISBON,
        {
          subject: "user",
          predicate: "loves",
          object: long,
          objectIsEntity: false,
          confidence: 0.9,
          sourceQuote: `I love ${long}`,
          validAt: null,
        },
      ],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    }));
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "I live in Lisbon.");
    await t.say(th, `I love ${long}`);
    fake.maxInputTokens = 200;
    const end = await t.post(`/v1/threads/${th}/end`);
    const { episodeId } = (await end.json()) as { episodeId: string };
    await runDueJobs(svc.deps);
    const facts = rowsOf<{ predicate: string }>(
      await svc.deps.db.execute(sql`SELECT predicate FROM facts WHERE episode_id = ${episodeId} ORDER BY predicate`),
    );
    expect(facts).toEqual([{ predicate: "lives_in" }, { predicate: "loves" }]);
  });
});

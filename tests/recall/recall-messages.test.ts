import { randomUUID } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { manualClock } from "../../lib/clock";
import { rowsOf } from "../../lib/db/rows";
import { countAndReadBatchSql, EMBEDDED_STORE_CHUNK } from "../../lib/evidence/embed";
import { EMBED_DEBOUNCE_MS, EMBED_MAX_WAIT_MS } from "../../lib/evidence/write";
import { runDueJobs, runJobByKey } from "../../lib/jobs/runner";
import { deleteProject } from "../../lib/projects";
import { RECALLED_MESSAGE_CHARS } from "../../lib/recall/messages";
import { recall } from "../../lib/recall/recall";
import { recallSql, retrieve } from "../../lib/recall/retrieve";
import { DEFAULT_SETTINGS } from "../../lib/settings/settings";
import { patchProjectSettings } from "../../lib/settings/store";
import type { ApiSchema } from "../helpers/api-types";
import { type FakeOpenAI, fakeEmbedding, near, startFakeOpenAI } from "../helpers/fake-openai";
import { insertIndexedMessages } from "../helpers/indexed-messages";
import { runMessageEmbedJob } from "../helpers/jobs-of-kind";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Conversations as evidence, through HTTP on the real database: a message is recalled by keyword
 * as soon as its 201 comes back and by meaning once its thread's embedding job ran (no episode
 * needed); what is indexed; quotes, asOf, limits; and the lifecycle (delete, erase, compaction).
 *
 * The fake provider embeds by concept: words of one concept (below) embed alike, so a question
 * can match a statement by meaning without sharing a word with it.
 */
const CONCEPTS: Record<string, string> = { lisbon: "home", moved: "home", live: "home", city: "home", reside: "home" };
const byConcept = (text: string) =>
  text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .map((w) => CONCEPTS[w] ?? w)
    .join(" ");

const RECALL = "/v1/memory/recall";
const W = "/v1/memory/working";
const STATEMENT = "I moved to Lisbon last spring and I work as a nurse.";

let svc: TestService;
let fake: FakeOpenAI;
let clock: ReturnType<typeof manualClock>;
/** Runs once, inside the next embedding call, before the provider answers. */
let duringNextEmbedding: (() => Promise<void>) | undefined;

beforeAll(async () => {
  fake = await startFakeOpenAI({
    embed: async (texts, dims) => {
      const during = duringNextEmbedding;
      duringNextEmbedding = undefined;
      await during?.();
      return texts.map((t) => fakeEmbedding(byConcept(t), dims));
    },
  });
  svc = await createTestService({ provider: fake, manualTime: true });
  clock = svc.clock as ReturnType<typeof manualClock>;
  clock.set(new Date("2026-06-01T12:00:00.000Z"));
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => fake.reset());

type Recall = ApiSchema<"RecallResponse">;

async function tenant(dataset = `ds-${randomUUID().slice(0, 6)}`) {
  const t = await newTenant(svc, `conv-${randomUUID().slice(0, 6)}`);
  const post = (path: string, json: unknown) => svc.request(path, { method: "POST", token: t.key, json });
  return {
    ...t,
    dataset,
    post,
    async thread() {
      const res = await post("/v1/threads", { dataset });
      expect(res.status).toBe(201);
      return ((await res.json()) as { threadId: string }).threadId;
    },
    async say(threadId: string, content: string, role = "user") {
      const res = await post(`${W}/threads/${threadId}/messages`, { role, content });
      expect(res.status, await res.clone().text()).toBe(201);
      return ((await res.json()) as { messageId: string }).messageId;
    },
    async recall(body: Record<string, unknown>, status = 200) {
      const res = await post(RECALL, { dataset, ...body });
      const text = await res.text();
      expect(res.status, text).toBe(status);
      return JSON.parse(text) as Recall;
    },
    /** Runs the embedding jobs: the clock moves past the debounce first. */
    async embed() {
      clock.advance(EMBED_DEBOUNCE_MS);
      await runDueJobs(svc.deps);
    },
  };
}

const ids = (r: Recall) => (r.messages ?? []).map((m) => m.messageId);

/** The fact "has_father Yusuf", linked to the entity Yusuf: the second hop of FATHER_QUESTION. */
async function fatherYusuf(t: { projectId: string; dataset: string }) {
  const entity = `ent_${randomUUID().slice(0, 8)}`;
  const fact = `fct_${randomUUID().slice(0, 8)}`;
  await svc.deps.db.execute(sql`
    WITH e AS (INSERT INTO entities (id, project_id, dataset, name, type)
        VALUES (${entity}, ${t.projectId}, ${t.dataset}, 'Yusuf', 'PERSON') RETURNING id),
      f AS (INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
        VALUES (${fact}, ${t.projectId}, ${t.dataset}, 'user', 'has_father', 'Yusuf', 0.9, 'my father Yusuf', now()) RETURNING id)
    INSERT INTO fact_entities (fact_id, entity_id) SELECT f.id, e.id FROM f, e`);
  return fact;
}
const FATHER_QUESTION = "Which city is my father based in?";

/** Recall's messages for FATHER_QUESTION with their signals: hybrid with `vector`, else keyword. */
async function fatherMessages(
  t: { projectId: string; dataset: string },
  { vector, messageLimit }: { vector?: number[]; messageLimit: number },
) {
  const { messages } = await retrieve(svc.deps, {
    projectId: t.projectId,
    dataset: t.dataset,
    mode: vector ? "hybrid" : "keyword",
    query: FATHER_QUESTION,
    vector,
    facts: true,
    episodes: false,
    messages: true,
    messageLimit,
  });
  return messages ?? [];
}

describe("freshness", () => {
  it("recalls a statement by a shared word right after its 201, and by meaning once its batch ran, before any episode", async () => {
    const t = await tenant();
    const first = await t.thread();
    await t.say(first, "My favourite colour is green.");
    const said = await t.say(first, STATEMENT);
    await t.thread(); // a new thread in the same dataset

    const byWord = await t.recall({ query: "What do you know about Lisbon?", include: ["messages"] });
    expect(ids(byWord)[0]).toBe(said);
    expect(byWord.messages?.[0]).toMatchObject({ threadId: first, role: "user", content: STATEMENT, truncated: false });
    expect(byWord.context).toContain(`] user: ${STATEMENT}`);

    // No word in common ("city", "reside" are the statement's concept, not its words).
    const question = { query: "Which city do I reside in?", include: ["messages"] };
    expect(ids(await t.recall(question))).not.toContain(said);
    expect(fake.embeddingCalls().some((c) => c.input.includes(STATEMENT))).toBe(false); // the 201 waited for no model

    await t.embed();
    expect(fake.embeddingCalls().filter((c) => c.input.includes(STATEMENT))).toHaveLength(1);
    const byMeaning = await t.recall(question);
    expect(ids(byMeaning)[0]).toBe(said);
    const [episodes] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM episodes WHERE project_id = ${t.projectId}`),
    );
    expect(episodes.n).toBe(0);
  });

  it("embeds a thread's messages in one batch after its last write, and at most EMBED_MAX_WAIT_MS after the first", async () => {
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "first thing");
    // Written to every second: the job waits for quiet, but not past the cap.
    for (let s = 0; s < 10; s++) {
      clock.advance(1000);
      await t.say(th, `more ${s}`);
      await runDueJobs(svc.deps);
    }
    const calls = fake.embeddingCalls();
    expect(calls.length).toBeGreaterThanOrEqual(1);
    expect(calls.length).toBeLessThanOrEqual(Math.ceil(10_000 / EMBED_MAX_WAIT_MS) + 1);
    expect(calls[0].input).toContain("first thing");
    await t.embed();
    const [left] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM message_search s WHERE s.thread_id = ${th}
        AND NOT EXISTS (SELECT 1 FROM message_vectors v WHERE v.message_id = s.message_id)`),
    );
    expect(left.n).toBe(0);
  });

  it("embeds a message written while its thread's batch was at the provider, with no later write", async () => {
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "gannets dive for fish");
    let during: string | undefined;
    duringNextEmbedding = async () => {
      during = await t.say(th, "puffins nest in burrows");
    };
    await t.embed();
    expect(during).toBeDefined();
    // Its write found the job running and did not arm it again: the job stays, due a debounce later.
    await t.embed();
    const inputs = fake.embeddingCalls().map((c) => c.input);
    expect(inputs).toEqual([["gannets dive for fish"], ["puffins nest in burrows"]]);
    const [vectors] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM message_vectors WHERE thread_id = ${th}`),
    );
    expect(vectors.n).toBe(2);
    const [jobs] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM jobs WHERE key = ${`embed:${th}`}`),
    );
    expect(jobs.n).toBe(0);
  });

  it("keeps a message when the provider fails: stored, searchable by keyword, embedded on a later try", async () => {
    const t = await tenant();
    const th = await t.thread();
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    const said = await t.say(th, STATEMENT);
    await t.embed();
    expect(ids(await t.recall({ query: "nurse", include: ["messages"] }))).toEqual([said]);
    fake.clearFailures();
    clock.advance(10 * 60_000); // past the job's backoff
    await runDueJobs(svc.deps);
    const [vector] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM message_vectors WHERE message_id = ${said}`),
    );
    expect(vector.n).toBe(1);
  });
});

describe("the response", () => {
  it("is the spec's without include messages: messages null, no conversation in the block", async () => {
    const t = await tenant();
    await t.say(await t.thread(), STATEMENT);
    const r = await t.recall({ query: "Lisbon" });
    expect(r.messages).toBeNull();
    expect(r.context).toBe("");
  });

  it("skips a message a returned fact quotes", async () => {
    const t = await tenant();
    const th = await t.thread();
    const quoted = await t.say(th, "I adopted a cat named Miso last week.");
    const other = await t.say(th, "The cat sleeps on my keyboard.");
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
      VALUES (${`fct_${randomUUID().slice(0, 8)}`}, ${t.projectId}, ${t.dataset}, 'user', 'adopted', 'a cat named Miso',
              0.9, 'adopted a cat named Miso', now())`);
    const r = await t.recall({ query: "cat", include: ["messages"] });
    expect(r.factCount).toBe(1);
    expect(ids(r)).toEqual([other]);
    expect(ids(r)).not.toContain(quoted);
    expect(r.context).toMatch(
      /# FACTS[\s\S]*# ENTITIES[\s\S]*# CONVERSATION[^\n]*\n- \[2026-06-\d\d\] user: The cat sleeps/,
    );
  });

  it("skips only the messages of the fact's own episode: a later message repeating its words with news stays", async () => {
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "I love coffee.");
    const later = await t.say(th, "I love coffee, but I quit it last week for green tea.");
    const brother = await t.say(th, "Tomorrow I fly to Oslo to see my brother.");
    const episode = `epi_${randomUUID().slice(0, 8)}`;
    await svc.deps.db.execute(sql`
      WITH e AS (INSERT INTO episodes (id, project_id, thread_id, dataset, status, from_seq, to_seq, started_at, ended_at)
        VALUES (${episode}, ${t.projectId}, ${th}, ${t.dataset}, 'completed', 1, 1, now(), now()) RETURNING id)
      INSERT INTO facts (id, project_id, dataset, episode_id, subject, predicate, object, confidence, source_quote, valid_at)
      SELECT ${`fct_${randomUUID().slice(0, 8)}`}, ${t.projectId}, ${t.dataset}, e.id, 'user', 'loves', 'coffee', 0.9,
        'I love coffee', now() FROM e
      UNION ALL
      SELECT ${`fct_${randomUUID().slice(0, 8)}`}, ${t.projectId}, ${t.dataset}, NULL, 'user', 'has_brother', 'Tom', 0.9,
        'Tom', now()`);
    const r = await t.recall({ query: "coffee brother", include: ["messages"], limit: 10 });
    expect(r.factCount).toBe(2);
    expect(ids(r).sort()).toEqual([later, brother].sort());
  });

  it("a failing message part costs only the messages: the facts still answer (spec rule 6)", async () => {
    const t = await tenant();
    await t.say(await t.thread(), STATEMENT);
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
      VALUES (${`fct_${randomUUID().slice(0, 8)}`}, ${t.projectId}, ${t.dataset}, 'user', 'lives_in', 'Lisbon', 0.9,
              'I moved to Lisbon', now())`);
    // The domain call with a database whose message statements fail (a request's own database
    // view is made per request, past any spy).
    const dialect = new PgDialect();
    const failing: string[] = [];
    const db = new Proxy(svc.deps.db, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (prop !== "execute") return typeof value === "function" ? value.bind(target) : value;
        return async (q: SQL) => {
          const text = dialect.sqlToQuery(q).sql;
          if (text.includes("m_top AS")) {
            failing.push(text);
            throw new Error("the messages' index is unreadable");
          }
          return target.execute(q);
        };
      },
    });
    const ctx = { deps: { ...svc.deps, db }, projectId: t.projectId };
    for (const include of [["messages"], ["messages", "episodes"]] as const) {
      const { body } = await recall(ctx, { dataset: t.dataset, query: "Lisbon", include: [...include] });
      expect(body.factCount, include.join()).toBe(1);
      expect(body.context).toContain("Lisbon");
      expect(body.messages).toEqual([]);
    }
    expect(failing.length).toBeGreaterThan(0);
  });

  it("a message repeating a better one's words takes no place: messageLimit distinct messages however many repeats", async () => {
    const t = await tenant();
    const th = await t.thread();
    // Every session's greeting, nearer the question than the rest, more of them than the block's
    // messages and facts together (the statement's messages before the block drops repeats).
    const greetings = DEFAULT_SETTINGS.semantic.factsInContext + 6;
    for (let i = 0; i < greetings; i++) {
      await t.say(th, i % 2 ? "Hello, I have a few updates!" : "hello,  I have a few updates.");
    }
    for (let i = 0; i < 6; i++) await t.say(th, `An update on the garden, number ${i}`);
    await t.embed();
    const r = await t.recall({ query: "Hello, any updates?", include: ["messages"], messageLimit: 3 });
    const lines = (r.messages ?? []).map((m) =>
      m.content
        .toLowerCase()
        .replace(/[^a-z0-9 ]/g, "")
        .replace(/ +/g, " "),
    );
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe("hello i have a few updates");
    expect(new Set(lines).size).toBe(3);
  });

  it("without a query: the most recent; with asOf: only messages written by then; limits by messageLimit and the setting", async () => {
    const t = await tenant();
    const th = await t.thread();
    const written: string[] = [];
    const byDefault = DEFAULT_SETTINGS.semantic.messagesInContext;
    for (let i = 0; i < byDefault + 2; i++) {
      clock.advance(60_000);
      written.push(await t.say(th, `note number ${i}`));
    }
    const asOf = clock.now().getTime() - (byDefault - 1) * 60_000;
    expect(ids(await t.recall({ include: ["messages"] }))).toEqual(written.slice(2).reverse());
    expect(ids(await t.recall({ include: ["messages"], messageLimit: 2 }))).toEqual(written.slice(-2).reverse());
    expect(ids(await t.recall({ include: ["messages"], asOf: new Date(asOf).toISOString() }))).toEqual(
      written.slice(0, 3).reverse(),
    );
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { semantic: { messagesInContext: 1 } });
    const one = await t.recall({ query: "note", include: ["messages"] });
    expect(one.messages).toHaveLength(1);
    expect(one.messages?.[0].relevanceScore).toBeGreaterThan(0);
  });

  it("without a query, a repeat of a newer message takes no place either", async () => {
    const t = await tenant();
    const th = await t.thread();
    const notes: string[] = [];
    for (let i = 0; i < 3; i++) {
      clock.advance(60_000);
      notes.push(await t.say(th, `note number ${i}`));
      clock.advance(60_000);
      await t.say(th, i % 2 ? "OK!" : "ok.");
    }
    clock.advance(60_000);
    const lastOk = await t.say(th, "ok");
    expect(ids(await t.recall({ include: ["messages"], messageLimit: 4 }))).toEqual([lastOk, ...notes.reverse()]);
  });

  it("keeps messages whose words differ only by stopwords (not/now, before/after), with a query and without", async () => {
    const t = await tenant();
    const th = await t.thread();
    const say = (content: string) => {
      clock.advance(60_000);
      return t.say(th, content);
    };
    // The English configuration drops not, now, before and after: each pair has the same search terms.
    const not = await say("I am not vegetarian");
    const now = await say("I am now vegetarian");
    const before = await say("I flew to Lisbon before the wedding");
    const after = await say("I flew to Lisbon after the wedding");
    const repeat = await say("I am NOW vegetarian!");
    await t.embed();
    const vegetarian = ids(await t.recall({ query: "Am I vegetarian?", include: ["messages"] }));
    expect(vegetarian).toEqual(expect.arrayContaining([not, repeat]));
    expect(vegetarian).not.toContain(now);
    const lisbon = ids(await t.recall({ query: "When did I fly to Lisbon?", include: ["messages"] }));
    expect(lisbon).toEqual(expect.arrayContaining([before, after]));
    expect(new Set(ids(await t.recall({ include: ["messages"] })))).toEqual(new Set([not, before, after, repeat]));
  });

  it("cuts a long message's line between two emoji, never inside one", async () => {
    const t = await tenant();
    const th = await t.thread();
    await t.say(th, "😀".repeat(200));
    const r = await t.recall({ include: ["messages"] });
    expect(r.context).not.toMatch(/\p{Cs}/u); // no lone surrogate
    expect(r.context).toContain(`] user: ${"😀".repeat(119)}…`);
  });

  it("gives a message matching one common word of the query less than a full keyword match", async () => {
    const t = await tenant();
    const th = await t.thread();
    const weekend: string[] = [];
    for (let i = 0; i < 5; i++) weekend.push(await t.say(th, `My cousin number ${i} comes over most weekends`));
    for (let i = 0; i < 15; i++) await t.say(th, `I read a good book, note ${i}`);
    await t.embed();
    const query = "How do I stay active at weekends?";
    const { messages } = await retrieve(svc.deps, {
      projectId: t.projectId,
      dataset: t.dataset,
      mode: "hybrid",
      query,
      vector: fakeEmbedding(byConcept(query), svc.deps.config.openai.embeddingDimensions),
      facts: true,
      episodes: false,
      messages: true,
    });
    const matched = (messages ?? []).filter((m) => weekend.includes(m.messageId));
    expect(matched.length).toBeGreaterThan(0);
    // Divided by the best candidate's BM25 alone, each had 1 (KEYWORD_FULL_MATCH_WORDS).
    for (const m of matched) {
      expect(m.signals.keyword).toBeGreaterThan(0);
      expect(m.signals.keyword).toBeLessThan(0.5);
    }
  });

  it("scores a message by its cosine whichever signal brought it, past the vector search's depth", async () => {
    const t = await tenant();
    const th = await t.thread();
    // More embedded messages than the vector search takes (depth ≥ 30), all nearer the question
    // than the one found by its rare word alone.
    for (let i = 0; i < 50; i++) await t.say(th, `I live in the city I moved to, note ${i}`);
    // Two words no other message holds: a full keyword match (KEYWORD_FULL_MATCH_WORDS).
    const rare = await t.say(th, "A zebra and a giraffe ate my lunch yesterday at noon");
    await t.embed();
    const query = "Which city do I reside in, zebra or giraffe?";
    const dims = svc.deps.config.openai.embeddingDimensions;
    const vector = fakeEmbedding(byConcept(query), dims);
    const cosines = rowsOf<{ id: string; cosine: number }>(
      await svc.deps.db.execute(sql`SELECT message_id AS id, 1 - (embedding::vector <=> ${`[${vector.join(",")}]`}::vector) AS cosine
        FROM message_vectors WHERE project_id = ${t.projectId} ORDER BY 2 DESC`),
    );
    expect(cosines).toHaveLength(51);
    expect(cosines.findIndex((c) => c.id === rare)).toBe(50); // last by meaning: not a vector candidate
    const { messages } = await retrieve(svc.deps, {
      projectId: t.projectId,
      dataset: t.dataset,
      mode: "hybrid",
      query,
      vector,
      facts: true,
      episodes: false,
      messages: true,
    });
    const byId = new Map(cosines.map((c) => [c.id, c.cosine]));
    expect(messages?.map((m) => m.messageId)).toContain(rare);
    for (const m of messages ?? []) expect(m.signals.vector).toBeCloseTo(byId.get(m.messageId) as number, 6);
  });

  it("a message naming an entity of the facts' second hop is a candidate with the hop's boost, however far by meaning", async () => {
    const t = await tenant();
    const th = await t.thread();
    const dims = svc.deps.config.openai.embeddingDimensions;
    const q = fakeEmbedding(byConcept(FATHER_QUESTION), dims);
    // No word of the question; extraction kept no fact of it.
    const job = await t.say(th, "Yusuf got a job at Zalando in Toronto");
    const others: string[] = [];
    for (let i = 0; i < 40; i++) others.push(await t.say(th, `A note on gardening, number ${i}`));
    await t.embed();
    // Every other message nearer the question than it, and more of them than the vector search takes.
    const cosineOf = new Map([[job, 0.25], ...others.map((id) => [id, 0.3] as const)]);
    for (const [id, cosine] of cosineOf) {
      await svc.deps.db.execute(
        sql`UPDATE message_vectors SET embedding = ${`[${near(q, cosine, id)}]`}::vector WHERE message_id = ${id}`,
      );
    }
    const fact = await fatherYusuf(t);
    const recall = () => fatherMessages(t, { vector: q, messageLimit: 1 });
    const messages = await recall();
    const { vectorWeight, entityWeight } = DEFAULT_SETTINGS.semantic;
    expect(messages[0]).toMatchObject({ messageId: job, signals: { entity: 1, keyword: 0 } });
    // Stored in single precision: the cosine to a few digits, the score from it exactly.
    expect(messages[0].signals.vector).toBeCloseTo(0.25, 3);
    expect(messages[0].relevanceScore).toBeCloseTo(vectorWeight * (messages[0].signals.vector ?? 0) + entityWeight, 9);
    for (const m of messages.slice(1)) expect(m.signals.entity).toBe(0);
    // Without the hop (the fact no longer names Yusuf's entity) it is no candidate at all.
    await svc.deps.db.execute(sql`DELETE FROM fact_entities WHERE fact_id = ${fact}`);
    expect((await recall()).map((m) => m.messageId)).not.toContain(job);
  });

  it("a query naming a time brings the messages written in it, however far their meaning and words", async () => {
    const t = await tenant();
    const resume = clock.now();
    let then: string;
    let th: string;
    try {
      clock.set(new Date("2025-05-10T09:00:00.000Z"));
      th = await t.thread();
      then = await t.say(th, "Ran the marathon");
      clock.set(new Date("2025-06-01T09:00:00.000Z"));
      // More messages than the vector search takes (depth ≥ 30), all nearer the question.
      for (let i = 0; i < 60; i++) {
        clock.advance(60_000);
        await t.say(th, `so much to do, item ${i}`);
      }
    } finally {
      clock.set(resume);
    }
    await t.embed();
    const question = "What did I do in May 2025?";
    const vector = fakeEmbedding(byConcept(question), svc.deps.config.openai.embeddingDimensions);
    const cosines = rowsOf<{ id: string; cosine: number }>(
      await svc.deps.db.execute(sql`SELECT message_id AS id, 1 - (embedding::vector <=> ${`[${vector.join(",")}]`}::vector) AS cosine
        FROM message_vectors WHERE project_id = ${t.projectId} ORDER BY 2 DESC`),
    );
    expect(cosines).toHaveLength(61);
    const mine = cosines.find((c) => c.id === then)?.cosine as number;
    // Last by meaning (not a vector candidate), yet within the time term of the others.
    expect(cosines.findIndex((c) => c.id === then)).toBe(60);
    expect(cosines[0].cosine).toBeLessThan(mine + DEFAULT_SETTINGS.semantic.timeWeight);
    const r = await t.recall({ query: question, include: ["messages"] });
    expect(ids(r)[0]).toBe(then);
    expect(r.context).toContain("] user: Ran the marathon");
  });

  it("rejects a messageLimit outside 1-100 naming the field", async () => {
    const t = await tenant();
    for (const messageLimit of [0, 101, 1.5, "3"]) {
      const res = await t.post(RECALL, { dataset: t.dataset, include: ["messages"], messageLimit });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: string; issues: { path: unknown[] }[] };
      expect(body.error).toBe("Validation error");
      expect(body.issues.map((i) => i.path)).toEqual([["messageLimit"]]);
    }
  });
});

describe("tenants", () => {
  it("never finds another project's embedded message by meaning, in a dataset of the same name", async () => {
    const theirs = await tenant();
    const mine = await tenant(theirs.dataset);
    await theirs.say(await theirs.thread(), STATEMENT);
    await mine.say(await mine.thread(), "My favourite colour is green.");
    await theirs.embed();
    const question = { query: "Which city do I reside in?", include: ["messages"] };
    expect((await mine.recall(question)).messages?.map((m) => m.content)).toEqual(["My favourite colour is green."]);
    expect((await theirs.recall(question)).messages?.map((m) => m.content)).toEqual([STATEMENT]);
  });
});

describe("at scale", () => {
  it("a dataset of 3,000 messages reads a word's messages and its candidates by index, never the whole table", async () => {
    const t = await tenant();
    const th = await t.thread();
    await svc.deps.db.execute(sql`
      INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search, terms_counted)
      SELECT 'msg_alone_' || g, ${t.projectId}, ${th}, ${t.dataset}, now(),
        to_tsvector('english', 'my garden number ' || g), false
      FROM generate_series(1, 3000) g`);
    await svc.deps.db.execute(sql`ANALYZE message_search`);
    // With a named time too: its messages come by the dataset's B-tree, newest first.
    const now = svc.deps.clock.now();
    for (const time of [null, { from: new Date(now.getTime() - 86_400_000), to: now }]) {
      const statement = recallSql(svc.deps, {
        projectId: t.projectId,
        dataset: t.dataset,
        mode: "keyword",
        query: "garden number 17",
        time,
        facts: true,
        episodes: false,
        messages: true,
      });
      const plan = planOf(await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`));
      const onTable = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "message_search");
      // A word's lookup (search @@) and the candidates' rows (read whole, no filter, to be hashed);
      // the most recent messages (the vector signal's stand-in) may be a scan where the table is
      // this dataset alone.
      const scans = onTable.filter(
        (n) =>
          n["Node Type"] === "Seq Scan" &&
          (!n.Filter || n.Filter.includes("search @@") || n.Filter.includes("created_at")),
      );
      expect(scans.map((n) => [n.Filter ?? "every row", n["Actual Rows"], n["Actual Loops"]])).toEqual([]);
      expect(onTable.some((n) => n["Node Type"] === "Bitmap Heap Scan")).toBe(true);
    }
  });

  // A large dataset's names are looked up in the keyword index; a small one's among its own rows
  // (MESSAGE_SCAN_MAX), where 51 messages are more than KEYWORD_COMMON_MIN_DOCS and 5% of its 351:
  // the query's words' rule, which is not the names'.
  it.each([
    ["large", 3000],
    ["small", 300],
  ])(
    "a hop name more than KEYWORD_PER_TERM messages of a %s dataset hold brings none of them; a rarer one all",
    async (_, gardens) => {
      const t = await tenant();
      const th = await t.thread();
      await fatherYusuf(t);
      // Messages with their index rows, counted (the statistics) as the thread's embedding job
      // leaves them.
      let seq = 1;
      // Message ids are global: each case's have its size in them.
      const seed = async (kind: string, count: number, text: (g: number) => string, daysAgo: number) => {
        const prefix = `msg_${gardens}_${kind}_`;
        const at = { projectId: t.projectId, dataset: t.dataset, threadId: th, firstSeq: seq };
        const messages = Array.from({ length: count }, (_, i) => ({
          id: `${prefix}${i + 1}`,
          content: text(i + 1),
          ageSeconds: daysAgo * 86_400,
        }));
        await insertIndexedMessages(svc.deps.db, at, messages);
        seq += count;
      };
      // The newest; the hop's messages older than the recent ones that stand in for the vector
      // signal (the keyword shape).
      await seed("garden", gardens, (g) => `my garden number ${g}`, 0);
      await seed("job", 1, () => "Yusuf got a job in Toronto", 2);
      await seed("visit", 50, (g) => `Yusuf visited on day ${g}`, 1);
      await svc.deps.db.execute(sql`ANALYZE message_search`);
      const recall = () => fatherMessages(t, { messageLimit: 100 });
      const job = (await recall()).find((m) => m.messageId === `msg_${gardens}_job_1`);
      expect(job?.signals.entity).toBe(1);
      // 151 messages name him: a hub of the conversation, boosted where another signal brings it.
      await seed("visit_more", 100, (g) => `Yusuf visited on day ${g}`, 1);
      expect((await recall()).map((m) => m.messageId)).not.toContain(`msg_${gardens}_job_1`);
    },
  );
});

describe("a long thread", () => {
  /** `count` user messages written through the batch route, then embedded by the thread's job. */
  async function longThread(t: Awaited<ReturnType<typeof tenant>>, count: number) {
    const th = await t.thread();
    for (let first = 0; first < count; first += 100) {
      const messages = Array.from({ length: 100 }, (_, i) => ({
        role: "user",
        content: `walked the dog, day ${first + i}`,
      }));
      const res = await t.post(`${W}/threads/${th}/messages:batch`, { messages });
      expect(res.status, await res.clone().text()).toBe(201);
    }
    clock.advance(EMBED_MAX_WAIT_MS);
    while (await runJobByKey(svc.deps, `embed:${th}`)) clock.advance(EMBED_MAX_WAIT_MS);
    return th;
  }
  const vectorsOf = async (th: string) =>
    rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM message_vectors WHERE thread_id = ${th}`),
    )[0].n;

  it("stores a batch's vectors in parts on the embedded database, a statement each, so requests run between them", async () => {
    const t = await tenant();
    const th = await t.thread();
    const messages = Array.from({ length: 100 }, (_, i) => ({ role: "user", content: `fed the cat, day ${i}` }));
    expect((await t.post(`${W}/threads/${th}/messages:batch`, { messages })).status).toBe(201);
    const dialect = new PgDialect();
    const textOf = (q: unknown) => dialect.sqlToQuery(q as SQL).sql;
    const original = svc.deps.db.execute.bind(svc.deps.db);
    const probes: Promise<unknown>[] = [];
    /** The statements in the order they were sent: the job's parts and a request's. */
    const order: string[] = [];
    const isStore = (q: unknown) => textOf(q).includes('INSERT INTO "message_vectors"');
    // A request arriving while the first part is stored: it is read on the event loop's next turn.
    const execute = vi.spyOn(svc.deps.db, "execute").mockImplementation((async (q: SQL) => {
      if (isStore(q)) order.push("part");
      const result = await original(q);
      if (isStore(q) && probes.length === 0)
        setTimeout(() => {
          order.push("request");
          probes.push(original(sql`SELECT 'a request' AS probe`));
        }, 0);
      return result;
    }) as never);
    try {
      clock.advance(EMBED_MAX_WAIT_MS);
      await runMessageEmbedJob(svc.deps, th);
      await Promise.all(probes);
      const texts = execute.mock.calls.map(([q]) => textOf(q));
      const stores = texts.filter((q) => q.includes('INSERT INTO "message_vectors"'));
      // A server stores the batch in one statement (one round trip on the edge).
      const parts = svc.deps.database.kind === "pglite" ? Math.ceil(100 / EMBEDDED_STORE_CHUNK) : 1;
      expect(stores).toHaveLength(parts);
      expect(stores.filter((q) => q.includes('INSERT INTO "usage_events"'))).toHaveLength(1);
      // On the embedded database the job lets the request's statement in before its next part.
      if (parts > 1) expect(order.slice(0, 3)).toEqual(["part", "request", "part"]);
    } finally {
      execute.mockRestore();
    }
    expect(fake.embeddingCalls()).toHaveLength(1);
    expect(await vectorsOf(th)).toBe(100);
    // The mark at the last indexed message (a compaction summary may follow it, never indexed).
    const [mark] = rowsOf<{ embedded_seq: number; indexed: number }>(
      await svc.deps.db.execute(sql`SELECT t.embedded_seq, (SELECT max(m.seq) FROM messages m
        JOIN message_search s ON s.message_id = m.id WHERE m.thread_id = t.id) AS indexed FROM threads t WHERE t.id = ${th}`),
    );
    expect(mark.embedded_seq).toBe(mark.indexed);
  });

  it("its embedding job reads the messages written since its last batch, not the thread's past", async () => {
    const t = await tenant();
    const th = await longThread(t, 2000);
    expect(await vectorsOf(th)).toBe(2000);
    const said = await t.say(th, "my sister Ana visited");
    // Statistics as the host's periodic check takes them: the planner knows this thread is most
    // of the table (with a one-sided range it then read all of it through a hash anti-join).
    await svc.deps.db.execute(sql`VACUUM ANALYZE message_search, messages, message_vectors`);

    // The job's first statement, run as the job runs it: it counts the new row and reads the batch.
    const plan = planOf(await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${countAndReadBatchSql(th)}`));
    const read = planNodes(plan.Plan)
      .filter((n) => ["messages", "message_search", "message_vectors"].includes(n["Relation Name"] ?? ""))
      .map((n) => [
        n["Relation Name"],
        ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 1),
      ]);
    // A row or two of each table (the new message, its index row, its thread's row), where the
    // whole thread's 2,000 were read before.
    expect(read.length).toBeGreaterThan(0);
    for (const [table, rows] of read) expect(rows, `${table}: ${JSON.stringify(read)}`).toBeLessThanOrEqual(2);

    clock.advance(EMBED_MAX_WAIT_MS);
    await runMessageEmbedJob(svc.deps, th);
    expect(fake.embeddingCalls().at(-1)?.input).toEqual(["my sister Ana visited"]);
    expect(await vectorsOf(th)).toBe(2001);
    expect(ids(await t.recall({ query: "Who is Ana?", include: ["messages"] }))).toContain(said);
  });
});

describe("what is indexed", () => {
  it("indexes the user's messages; the assistant's only where the project says so; never system or tool", async () => {
    const t = await tenant();
    const th = await t.thread();
    const user = await t.say(th, "zebra from the user");
    await t.say(th, "zebra from the assistant", "assistant");
    await t.say(th, "zebra from the system", "system");
    await t.say(th, "zebra from a tool", "tool");
    expect(ids(await t.recall({ query: "zebra", include: ["messages"] }))).toEqual([user]);

    await patchProjectSettings(
      { deps: svc.deps, projectId: t.projectId },
      { semantic: { indexAssistantMessages: true } },
    );
    const assistant = await t.say(th, "zebra again from the assistant", "assistant");
    const r = await t.recall({ query: "zebra", include: ["messages"] });
    expect(new Set(ids(r))).toEqual(new Set([user, assistant]));
  });

  it("indexes a message of a batch in the batch's statement", async () => {
    const t = await tenant();
    const th = await t.thread();
    const res = await t.post(`${W}/messages:batch`, {
      messages: [
        { threadId: th, role: "user", content: "okapi one" },
        { threadId: th, role: "assistant", content: "okapi two" },
      ],
    });
    expect(res.status).toBe(201);
    const [first] = ((await res.json()) as { messages: { messageId: string }[] }).messages;
    expect(ids(await t.recall({ query: "okapi", include: ["messages"] }))).toEqual([first.messageId]);
  });

  it("indexes a message longer than a tsvector holds (its head)", async () => {
    const t = await tenant();
    const th = await t.thread();
    const long = `walrus ${"abcdefgh ".repeat(110_000)}`;
    const res = await t.post(`${W}/threads/${th}/messages`, { role: "user", content: long });
    expect(res.status).toBe(201);
    const r = await t.recall({ query: "walrus", include: ["messages"] });
    // Its head in the response (RECALLED_MESSAGE_CHARS), not its megabyte; the block's line shorter.
    expect(r.messages?.[0]).toMatchObject({ content: long.slice(0, RECALLED_MESSAGE_CHARS), truncated: true });
    expect(r.context.length).toBeLessThan(400);
  });
});

describe("lifecycle", () => {
  // No route deletes one thread today: the index rows cascade with the thread row, whoever deletes it.
  it("a deleted thread's messages leave recall; an erased dataset's index rows and vectors go with it", async () => {
    const t = await tenant();
    const [a, b] = [await t.thread(), await t.thread()];
    await t.say(a, "heron in thread a");
    const kept = await t.say(b, "heron in thread b");
    await t.embed();
    await svc.deps.db.execute(sql`DELETE FROM threads WHERE id = ${a}`);
    expect(ids(await t.recall({ query: "heron", include: ["messages"] }))).toEqual([kept]);

    const res = await svc.request(`${RECALL}/datasets/${t.dataset}`, { method: "DELETE", token: t.key });
    expect(await res.json()).toEqual({
      dataset: t.dataset,
      deleted: { threads: 1, episodes: 0, facts: 0, entities: 0 },
    });
    const [left] = rowsOf<{ search: number; vectors: number; terms: number }>(
      await svc.deps.db.execute(sql`SELECT
        (SELECT count(*)::int FROM message_search WHERE project_id = ${t.projectId}) AS search,
        (SELECT count(*)::int FROM message_vectors WHERE project_id = ${t.projectId}) AS vectors,
        (SELECT count(*)::int FROM message_terms WHERE project_id = ${t.projectId} AND docs <> 0) AS terms`),
    );
    expect(left).toEqual({ search: 0, vectors: 0, terms: 0 });
    expect((await t.recall({ query: "heron", include: ["messages"] })).messages).toEqual([]);
  });

  it("forgetting a fact takes the messages that said it out of recall (they stay in the thread), and no others", async () => {
    const t = await tenant();
    const th = await t.thread();
    const said = await t.say(th, "By the way,   I adopted a CAT named Miso last week!");
    const other = await t.say(th, "The cat sleeps on my keyboard.");
    await t.embed();
    const factId = `fct_${randomUUID().slice(0, 8)}`;
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
      VALUES (${factId}, ${t.projectId}, ${t.dataset}, 'user', 'adopted', 'a cat named Miso',
              0.9, 'I adopted a cat named Miso', now())`);
    const res = await svc.request(`/v1/memory/semantic/datasets/${t.dataset}/facts/${factId}`, {
      method: "DELETE",
      token: t.key,
    });
    expect(res.status).toBe(200);
    const r = await t.recall({ query: "cat Miso", include: ["messages"] });
    expect(r.factCount).toBe(0);
    expect(ids(r)).toEqual([other]);
    expect(r.context).not.toContain("Miso");
    const [left] = rowsOf<{ search: number; vectors: number }>(
      await svc.deps.db.execute(sql`SELECT
        (SELECT count(*)::int FROM message_search WHERE message_id = ${said}) AS search,
        (SELECT count(*)::int FROM message_vectors WHERE message_id = ${said}) AS vectors`),
    );
    expect(left).toEqual({ search: 0, vectors: 0 });
    const listed = await svc.request(`${W}/threads/${th}/messages`, { token: t.key });
    expect(((await listed.json()) as { messages: { messageId: string }[] }).messages.map((m) => m.messageId)).toEqual([
      said,
      other,
    ]);
  });

  it("forgetting takes out a message whose quotation marks the quote has otherwise or not at all, as extraction accepted it", async () => {
    const t = await tenant();
    const th = await t.thread();
    // A phone's apostrophe where the model writes ', and a name in quotes the model dropped.
    const apostrophe = await t.say(th, "I\u2019m a night-shift nurse at Lisbon General");
    const quoted = await t.say(th, 'My dog is called "Biscuit" and he is three');
    await t.embed();
    const forget = async (quote: string, object: string) => {
      const factId = `fct_${randomUUID().slice(0, 8)}`;
      await svc.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
        VALUES (${factId}, ${t.projectId}, ${t.dataset}, 'user', 'said', ${object}, 0.9, ${quote}, now())`);
      // Live, the fact carries the message's evidence: the block does not repeat it.
      expect(ids(await t.recall({ query: object, include: ["messages"] }))).not.toContain(
        object === "nurse" ? apostrophe : quoted,
      );
      const res = await svc.request(`/v1/memory/semantic/datasets/${t.dataset}/facts/${factId}`, {
        method: "DELETE",
        token: t.key,
      });
      expect(res.status).toBe(200);
    };
    await forget("I'm a night-shift nurse at Lisbon General", "nurse");
    await forget("My dog is called Biscuit", "Biscuit");
    for (const query of ["nurse", "dog Biscuit", undefined]) {
      expect(ids(await t.recall({ query, include: ["messages"] }))).toEqual([]);
    }
  });

  it("an erase during a thread's embedding call keeps what the call cost in the ledger", async () => {
    const t = await tenant();
    await t.say(await t.thread(), STATEMENT);
    duringNextEmbedding = async () => {
      const erased = await svc.request(`${RECALL}/datasets/${t.dataset}`, { method: "DELETE", token: t.key });
      expect(erased.status).toBe(200);
    };
    await t.embed();
    expect(fake.embeddingCalls()).toHaveLength(1);
    const [row] = rowsOf<{ n: number; dataset: string }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n, min(dataset) AS dataset FROM usage_events
        WHERE project_id = ${t.projectId} AND operation = 'message_embedding'`),
    );
    expect(row).toEqual({ n: 1, dataset: t.dataset });
  });

  it("a deleted project leaves no index rows, vectors or statistics", async () => {
    const t = await tenant();
    await t.say(await t.thread(), "osprey");
    await t.embed();
    await deleteProject({ deps: svc.deps, projectId: t.projectId });
    const [left] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT
        (SELECT count(*) FROM message_search WHERE project_id = ${t.projectId})
        + (SELECT count(*) FROM message_vectors WHERE project_id = ${t.projectId})
        + (SELECT count(*) FROM message_terms WHERE project_id = ${t.projectId}) AS n`),
    );
    expect(Number(left.n)).toBe(0);
  });

  it("keeps compacted messages searchable", async () => {
    const t = await tenant();
    const th = await t.thread();
    const early = await t.say(th, "the ibis nests by the river");
    for (let i = 0; i < 12; i++) await t.say(th, `filler ${i}`);
    fake.onText(() => "A summary of the ibis talk.");
    const res = await t.post(`${W}/threads/${th}/compact`, {});
    expect(res.status).toBe(200);
    expect((await res.json()) as object).toHaveProperty("summaryMessageId");
    expect(ids(await t.recall({ query: "ibis", include: ["messages"] }))).toEqual([early]);
  });
});

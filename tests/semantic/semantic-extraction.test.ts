import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { EMBED_INPUT_CHARS } from "../../lib/evidence/embed";
import { LEASE_MS, runDueJobs, sweep } from "../../lib/jobs/runner";
import { FACT_EXTRACTION_PROMPT } from "../../lib/llm/prompts";
import { processSemantic } from "../../lib/pipeline/run";
import { SEMANTIC_MAX_RETRIES } from "../../lib/semantic/extract";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { gate, type Tenant, transcriptLines } from "../helpers/episodic-fixtures";
import { fakeEmbedding } from "../helpers/fake-openai";
import { type Extraction, fact, factText, judge, judgedPairs, useSemanticService } from "../helpers/semantic-fixtures";
import { testPgUrl } from "../helpers/test-database";

/**
 * Fact extraction from completed episodes (spec: "What the service does" 4-7, Fact and Entity,
 * the fact lifecycle, semantic settings 7-10 and 13), on the real database through the real job
 * path: end a thread over HTTP, run the due jobs or the sweep, then read the tables.
 */
const statements: string[] = [];
let recording = false;
const S = useSemanticService({
  onQuery: (statement) => {
    if (recording) statements.push(statement);
  },
});
const { h, tenant, extract, facts, factBy, entities, links, semanticState, setSemantic, calls, similarity } = S;

const RETRY_INTERVAL_MS = 120_000;
const db = () => h.svc.deps.db;

/**
 * The provider's embedding calls for episodes (summaries, facts, entities): all but the threads'
 * messages' batches (the `message-embed` job and the batch before an episode: every input is an
 * indexed message's text).
 */
async function episodeEmbeddingCalls() {
  const texts = new Set(
    rowsOf<{ content: string }>(
      await db().execute(
        sql`SELECT left(m.content, ${EMBED_INPUT_CHARS}) AS content FROM message_search s JOIN messages m ON m.id = s.message_id`,
      ),
    ).map((r) => r.content),
  );
  return h.fake.embeddingCalls().filter((c) => !(c.input.length > 0 && c.input.every((text) => texts.has(text))));
}

/** `calls()`, counting the episodes' embedding batches only. */
async function episodeCalls() {
  return { ...calls(), embeddings: (await episodeEmbeddingCalls()).length };
}

async function listFacts(t: Tenant, query = "") {
  const res = await t.get(`/v1/memory/semantic/datasets/ds/facts${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as { facts: Record<string, unknown>[]; total: number };
}

describe("happy path", () => {
  it("writes facts with every field, typed entities and links, and completes extraction", async () => {
    const t = await tenant();
    const lines = [
      "Hi! I live in Lisbon and I work at Acme Corp.",
      "Nice, Lisbon is lovely. How can I help?",
      "I started learning the cello in March 2024. Can you find me a teacher?",
      "Sure, here are three teachers near you.",
    ];
    const answer: Extraction = {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon", { objectIsEntity: true, confidence: 0.9 }),
        fact("works_at", "Acme Corp", "I work at Acme Corp", { objectIsEntity: true, confidence: 0.75 }),
        fact("plays", "cello", "I started learning the cello in March 2024", { validAt: "2024-03-01", confidence: 1 }),
      ],
      entities: [
        { name: "Lisbon", type: "PLACE" },
        { name: "Acme Corp", type: "ORG" },
      ],
    };
    const { episodeId, said, threadId } = await extract(t, lines, answer);

    expect(await semanticState(episodeId)).toEqual({
      status: "completed",
      semanticStatus: "completed",
      semanticError: null,
      semanticRetryCount: 0,
    });
    // Not on the API: the episode shows no extraction state.
    const episode = await t.episode(episodeId);
    expect(episode.threadId).toBe(threadId);
    expect(Object.keys(episode).filter((k) => /semantic/i.test(k))).toEqual([]);

    const rows = await facts(t);
    const base = { dataset: "ds", episodeId, subject: "user", validUntil: null, invalidAt: null };
    expect(rows.map(({ id, createdAt, ...rest }) => rest)).toEqual([
      {
        ...base,
        predicate: "lives_in",
        object: "Lisbon",
        objectIsEntity: true,
        confidence: 0.9,
        sourceQuote: "I live in Lisbon",
        // No stated time: the time of the user message holding the quote.
        validAt: said[0].createdAt,
      },
      {
        ...base,
        predicate: "plays",
        object: "cello",
        objectIsEntity: false,
        confidence: 1,
        sourceQuote: "I started learning the cello in March 2024",
        validAt: "2024-03-01T00:00:00.000Z",
      },
      {
        ...base,
        predicate: "works_at",
        object: "Acme Corp",
        objectIsEntity: true,
        confidence: 0.75,
        sourceQuote: "I work at Acme Corp",
        validAt: said[0].createdAt,
      },
    ]);
    for (const r of rows) {
      expect(r.id).toMatch(/^fct_[0-9a-f]{20}$/);
      expect(r.createdAt).toBe(h.clock.now().toISOString());
    }

    // The embedding stored with each fact is the embedding of "subject predicate object".
    const [stored] = rowsOf<{ v: string; dims: number }>(
      await db().execute(
        sql`SELECT embedding::text AS v, vector_dims(embedding) AS dims FROM facts WHERE project_id = ${t.projectId} AND predicate = 'lives_in'`,
      ),
    );
    expect(Number(stored.dims)).toBe(TEST_EMBEDDING_DIMENSIONS);
    const expected = fakeEmbedding("user lives_in Lisbon", TEST_EMBEDDING_DIMENSIONS);
    (JSON.parse(stored.v) as number[]).forEach((v, i) => {
      // Stored at half precision (11 significant bits).
      expect(v).toBeCloseTo(expected[i], 3);
    });

    const ents = await entities(t);
    expect(ents.map(({ id, ...e }) => e)).toEqual([
      { dataset: "ds", name: "Acme Corp", type: "ORG", dims: TEST_EMBEDDING_DIMENSIONS },
      { dataset: "ds", name: "Lisbon", type: "PLACE", dims: TEST_EMBEDDING_DIMENSIONS },
    ]);
    expect((await links(t)).map((l) => l.link)).toEqual([
      "lives_in Lisbon -> Lisbon (PLACE)",
      "works_at Acme Corp -> Acme Corp (ORG)",
    ]);

    // The API serves the same facts and entities.
    const listed = await listFacts(t);
    expect(listed.total).toBe(3);
    expect(listed.facts.find((f) => f.predicate === "lives_in")).toMatchObject({
      subject: "user",
      object: "Lisbon",
      objectIsEntity: true,
      confidence: 0.9,
      sourceQuote: "I live in Lisbon",
      validAt: said[0].createdAt,
      validUntil: null,
      invalidAt: null,
      episodeId,
    });
    const res = await t.get("/v1/memory/semantic/datasets/ds/entities/lisbon/facts");
    expect(((await res.json()) as { facts: { object: string }[] }).facts.map((f) => f.object)).toEqual(["Lisbon"]);
  });

  it("stores a lone surrogate in the model's strings as U+FFFD, in the summary, its key learnings, facts and entities", async () => {
    // A JSON escape like \ud800 is valid JSON but no character: Postgres refuses it in jsonb
    // (key learnings) and every retry alike, so the episode would fail for good.
    const lone = String.fromCharCode(0xd800);
    h.fake.onStructured("episode_summary", () => ({ summary: `Lisbon${lone}.`, keyLearnings: [`moved${lone}`] }));
    const t = await tenant();
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], {
      facts: [fact("lives_in", `Lisbon${lone}`, "I live in Lisbon", { objectIsEntity: true })],
      entities: [{ name: `Lisbon${lone}`, type: "PLACE" }],
    });
    expect(await semanticState(episodeId)).toMatchObject({ status: "completed", semanticStatus: "completed" });
    const episode = await t.episode(episodeId);
    expect([episode.summary, episode.keyLearnings]).toEqual(["Lisbon\ufffd.", ["moved\ufffd"]]);
    expect((await facts(t)).map((f) => f.object)).toEqual(["Lisbon\ufffd"]);
    expect((await entities(t)).map((e) => e.name)).toEqual(["Lisbon\ufffd"]);
  });

  it("takes the quote's time for a validAt the database cannot hold (year 0, or past 9999)", async () => {
    const t = await tenant();
    const { episodeId, said } = await extract(t, ["I live in Lisbon and I work at Acme", "ok"], {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon", { validAt: "0000-06-01" }),
        fact("works_at", "Acme", "I work at Acme", { validAt: "+275760-09-13T00:00:00Z" }),
      ],
      entities: [],
    });
    expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "completed", semanticError: null });
    expect((await facts(t)).map((f) => f.validAt)).toEqual([said[0].createdAt, said[0].createdAt]);
  });

  it("takes validAt from the user message holding the quote, and clamps confidence into 0-1", async () => {
    const t = await tenant();
    const { said } = await extract(t, ["I have a dog.", "Cute!", "Also I drive a red Fiat.", "Nice."], {
      facts: [
        fact("owns", "dog", "I have a dog", { confidence: 7 }),
        fact("drives", "red Fiat", "I drive a red Fiat", { confidence: -1, validAt: "not a date" }),
        // A real column cannot hold 1e-50 (the insert failed with 22003): it is stored as 0.
        fact("has", "a pet", "I have a dog", { confidence: 1e-50 }),
      ],
      entities: [],
    });
    expect(await factBy(t, "owns", "dog")).toMatchObject({ validAt: said[0].createdAt, confidence: 1 });
    // An unparseable stated time falls back to the message's time.
    expect(await factBy(t, "drives", "red Fiat")).toMatchObject({ validAt: said[2].createdAt, confidence: 0 });
    expect(await factBy(t, "has", "a pet")).toMatchObject({ confidence: 0 });
  });
});

describe("what the extraction model is asked, and what is kept", () => {
  it("sends the transcript under a user-only prompt that discards chatter, explanations and other subjects", async () => {
    const t = await tenant();
    const { episodeId } = await extract(
      t,
      ["Hi,\n  I am   vegetarian.", "Great: a vegetarian diet excludes meat.", "Thanks! Plan my week."],
      { facts: [], entities: [] },
    );
    const [call] = h.fake.chatCalls("fact_extraction");
    expect(h.fake.chatCalls("fact_extraction")).toHaveLength(1);
    expect(call.response_format).toMatchObject({
      type: "json_schema",
      json_schema: { name: "fact_extraction", strict: true },
    });
    expect(call.messages[0]).toEqual({ role: "system", content: FACT_EXTRACTION_PROMPT });
    const prompt = call.messages[0].content;
    expect(prompt).toMatch(/claims about the user only/);
    expect(prompt).toMatch(/subject exactly "user"/);
    expect(prompt).toMatch(/task chatter/);
    expect(prompt).toMatch(/anything the assistant said or explained/);
    expect(prompt).toMatch(/subject is someone or something other than the user/);
    expect(prompt).toMatch(/copied character for character from a user line/);
    expect(prompt).toMatch(/PERSON, ORG, PLACE, PRODUCT, EVENT, CONCEPT, OTHER/);
    expect(transcriptLines(call)).toEqual([
      "[1] user: Hi, I am vegetarian.",
      "[2] assistant: Great: a vegetarian diet excludes meat.",
      "[3] user: Thanks! Plan my week.",
    ]);
    // The same transcript as the summary's.
    expect(call.messages[1]).toEqual(h.fake.chatCalls("episode_summary")[0].messages[1]);

    // Nothing extracted: no embedding batch beyond the summary's, no judge, completed.
    expect(await episodeCalls()).toMatchObject({ summary: 1, extraction: 1, judge: 0, embeddings: 1 });
    expect(await facts(t)).toEqual([]);
    expect((await semanticState(episodeId)).semanticStatus).toBe("completed");
  });

  it("drops facts about others, quotes not in a user message, and empty parts; normalises quotes", async () => {
    const t = await tenant();
    const lines = [
      "I live in Lisbon. My sister lives in Porto.",
      "Lisbon is lovely; it has seven hills.",
      "I  work at  ‘Acme’ Corp.",
      "Noted.",
    ];
    await extract(t, lines, {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon"),
        // Someone else's fact, even with a genuine user quote.
        fact("lives_in", "Porto", "My sister lives in Porto", { subject: "sister" }),
        fact("sister_lives_in", "Porto", "My sister lives in Porto", { subject: "user's sister" }),
        // The assistant's words, a paraphrase and an invented quote.
        fact("likes", "hills", "Lisbon is lovely; it has seven hills"),
        fact("resides_in", "Lisbon", "I reside in Lisbon"),
        fact("likes", "jazz", "I adore jazz"),
        fact("likes", "nothing", ""),
        // Empty parts.
        fact("", "Lisbon", "I live in Lisbon"),
        fact("lives_in", "   ", "I live in Lisbon"),
        // Case, spacing and typographic quotes do not matter when comparing the quote.
        fact("works_at", "Acme Corp", "i work at 'acme' corp", { subject: " User " }),
      ],
      entities: [],
    });
    expect((await facts(t)).map((f) => `${f.subject} ${f.predicate} ${f.object} | ${f.sourceQuote}`)).toEqual([
      "user lives_in Lisbon | I live in Lisbon",
      "user works_at Acme Corp | i work at 'acme' corp",
    ]);
    // Only the kept facts were embedded (after the summary's batch).
    expect((await episodeEmbeddingCalls())[1].input).toEqual([
      factText("lives_in", "Lisbon"),
      factText("works_at", "Acme Corp"),
    ]);
  });

  it("uses the thread's transcript cap for extraction too (the same transcript as the summary)", async () => {
    const t = await tenant();
    const lines = Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? `I like colour ${i}` : `ok ${i}`));
    await extract(
      t,
      lines,
      { facts: [fact("likes", "colour 4", "I like colour 4")], entities: [] },
      {
        episodic: { maxMessages: 4 },
      },
    );
    const [extraction] = h.fake.chatCalls("fact_extraction");
    const [summary] = h.fake.chatCalls("episode_summary");
    expect(transcriptLines(extraction)).toEqual([
      "[1] user: I like colour 0",
      "[2] assistant: ok 1",
      "[... 2 messages omitted ...]",
      "[5] user: I like colour 4",
      "[6] assistant: ok 5",
    ]);
    expect(extraction.messages[1]).toEqual(summary.messages[1]);
    expect((await facts(t)).map((f) => f.object)).toEqual(["colour 4"]);
  });
});

describe("budget", () => {
  it("makes at most 3 model calls and 2 embedding batches per episode, whatever the number of facts", async () => {
    const t = await tenant();
    const things = ["jazz", "tea", "chess", "hiking", "sushi", "cats"];
    await extract(
      t,
      things.flatMap((x) => [`I like ${x}`, "ok"]),
      { facts: things.map((x) => fact("likes", x, `I like ${x}`)), entities: [] },
    );
    // Every pair of "user likes X" facts is in the band.
    await setSemantic(t, { contradictionBandMin: 0.1, factDedupThreshold: 0.99 });
    const before = await episodeCalls();
    h.fake.onStructured(
      "contradiction_judgement",
      judge(() => false),
    );
    const more = Array.from({ length: 12 }, (_, i) => `thing${i}`);
    await extract(
      t,
      more.flatMap((x) => [`I really like ${x} at Acme`, "ok"]),
      {
        facts: more.map((x) => fact("likes", x, `I really like ${x} at Acme`)),
        entities: [
          { name: "Acme", type: "ORG" },
          { name: "Thing0", type: "CONCEPT" },
          { name: "Thing1", type: "CONCEPT" },
        ],
      },
    );
    const after = await episodeCalls();
    expect({
      summary: after.summary - before.summary,
      extraction: after.extraction - before.extraction,
      judge: after.judge - before.judge,
      chat: after.chat - before.chat,
      embeddings: after.embeddings - before.embeddings,
    }).toEqual({ summary: 1, extraction: 1, judge: 1, chat: 3, embeddings: 2 });
    // The one judge call carried every candidate pair (5 nearest live facts per new fact).
    const pairs = judgedPairs(h.fake.chatCalls("contradiction_judgement")[0]);
    expect(pairs.length).toBeGreaterThan(12);
    expect(pairs.map((p) => p.pair)).toEqual(pairs.map((_, i) => i + 1));
    // One embedding batch for 12 facts and 3 entities.
    expect((await episodeEmbeddingCalls()).at(-1)?.input).toHaveLength(15);
    expect(await facts(t)).toHaveLength(18);
  });

  /**
   * processSemantic on an episode whose extraction is pending (the first attempt was made to
   * fail), recording its SQL statements: `n` new facts, one contradicting a live fact, linked to
   * a merged and a new entity.
   */
  async function measured(n: number) {
    const t = await tenant();
    await extract(t, ["I live in Paris", "ok"], {
      facts: [fact("lives_in", "Paris", "I live in Paris", { objectIsEntity: true })],
      entities: [{ name: "Paris", type: "PLACE" }],
    });
    await setSemantic(t, { contradictionBandMin: 0.1, factDedupThreshold: 0.99 });
    const extras = Array.from({ length: n - 2 }, (_, i) => `hobby${i}`);
    const lines = [
      "I moved to Lisbon from Paris",
      "ok",
      "I work at Initech",
      "ok",
      ...extras.flatMap((x) => [`I do ${x}`, "ok"]),
    ];
    const { episodeId } = await extract(t, lines, { facts: "not a list" } as unknown as Extraction);
    expect((await semanticState(episodeId)).semanticStatus).toBe("failed");
    await db().execute(sql`UPDATE episodes SET semantic_status = 'pending' WHERE id = ${episodeId}`);
    h.fake.onStructured("fact_extraction", () => ({
      facts: [
        fact("moved_to", "Lisbon", "I moved to Lisbon from Paris", { objectIsEntity: true }),
        fact("works_at", "Initech", "I work at Initech", { objectIsEntity: true }),
        ...extras.map((x) => fact("does", x, `I do ${x}`)),
      ],
      entities: [
        { name: "paris", type: "PLACE" },
        { name: "Lisbon", type: "PLACE" },
        { name: "Initech", type: "ORG" },
      ],
    }));
    h.fake.onStructured(
      "contradiction_judgement",
      judge((old, young) => old === "user lives_in Paris" && young === "user moved_to Lisbon"),
    );
    statements.length = 0;
    recording = true;
    const outcome = await processSemantic(h.svc.deps, episodeId);
    recording = false;
    // The job's own rows (scheduled, claimed, done) are the runner's bookkeeping, not extraction's.
    const extraction = statements.filter(
      (s) =>
        !/^\s*((INSERT INTO|UPDATE|DELETE FROM) "jobs"|WITH due AS MATERIALIZED \(\s*SELECT id FROM "jobs")/.test(s),
    );
    expect(outcome).toBe("completed");
    expect(await facts(t)).toHaveLength(n + 1);
    expect((await factBy(t, "lives_in", "Paris")).invalidAt).not.toBeNull();
    expect((await links(t)).map((l) => l.link)).toEqual(
      expect.arrayContaining(["moved_to Lisbon -> Lisbon (PLACE)", "works_at Initech -> Initech (ORG)"]),
    );
    expect((await entities(t)).map((e) => e.name)).toEqual(["Paris", "Initech", "Lisbon"]);
    return extraction;
  }

  it("spends a constant number of SQL statements on extraction, whatever the number of facts", async () => {
    const two = await measured(2);
    const twelve = await measured(12);
    const shape = (list: string[]) => list.map((s) => s.replace(/\s+/g, " ").trim().split(" ").slice(0, 3).join(" "));
    // The claim, the candidate search (in one batch with its narrow HNSW setting), then the write
    // batch (one transaction): the setting, the claim guard (status and report), entities, facts
    // (with the report as written), links, invalidations, and the usage ledger's rows of the
    // extraction's model calls. 2 facts or 12, the same 10 statements in 3 round trips.
    // On a PostgreSQL server (TEST_PG_URL), node-postgres also sends each transaction's BEGIN and
    // COMMIT (two more round trips each); PGlite's transactions do not pass through the logger.
    const narrow = "SELECT set_config('hnsw.ef_search', $1,";
    const tx = (...list: string[]) => (testPgUrl() ? ["begin", ...list, "commit"] : list);
    expect(shape(two)).toEqual([
      "WITH e AS",
      ...tx(narrow, "WITH q AS"),
      ...tx(
        narrow,
        "WITH done AS",
        'insert into "entities"',
        "WITH written AS",
        'insert into "fact_entities"',
        "WITH v AS",
        'INSERT INTO "usage_events"',
      ),
    ]);
    expect(shape(twelve)).toEqual(shape(two));
  });
});

describe("failure and retry", () => {
  it("a failed extraction call marks extraction failed while every API call stays 200", async () => {
    const t = await tenant();
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], () => {
      throw new Error("boom");
    });
    const state = await semanticState(episodeId);
    expect(state).toMatchObject({ status: "completed", semanticStatus: "failed", semanticRetryCount: 0 });
    expect(state.semanticError).toMatch(/fact_extraction/);
    expect(state.semanticError).toMatch(/500/);
    expect((await t.episode(episodeId)).status).toBe("completed");
    expect((await t.episode(episodeId)).error).toBeNull();
    expect(await listFacts(t)).toEqual({ facts: [], total: 0 });
    expect((await t.get("/v1/memory/semantic/datasets/ds/entities")).status).toBe(200);
    const health = await h.svc.request("/health");
    expect(health.status).toBe(200);
  });

  it("a schema-invalid answer fails it too", async () => {
    const t = await tenant();
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], () => ({
      facts: [{ subject: "user", predicate: "lives_in" }],
      entities: [],
    }));
    expect(await semanticState(episodeId)).toMatchObject({
      status: "completed",
      semanticStatus: "failed",
      semanticError: expect.stringMatching(/fact_extraction.*schema/),
    });
    // Entity types are a closed set.
    const { episodeId: second } = await extract(t, ["I live in Porto", "ok"], {
      facts: [fact("lives_in", "Porto", "I live in Porto")],
      entities: [{ name: "Porto", type: "CITY" }],
    });
    expect((await semanticState(second)).semanticStatus).toBe("failed");
    expect(await facts(t)).toEqual([]);
  });

  it("the sweep re-queues it a retry interval after each failure, at most 3 times, then it stays failed", async () => {
    const t = await tenant();
    const failing = () => {
      throw new Error("still down");
    };
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], failing);
    expect(SEMANTIC_MAX_RETRIES).toBe(3);
    expect(calls().extraction).toBe(1);

    for (let retry = 1; retry <= 3; retry++) {
      h.clock.advance(RETRY_INTERVAL_MS - 1);
      expect((await sweep(h.svc.deps)).retriedExtractions).toBe(0);
      expect(calls().extraction).toBe(retry);
      h.clock.advance(1);
      const report = await sweep(h.svc.deps);
      expect(report).toMatchObject({ retriedExtractions: 1, ran: 1 });
      expect(calls().extraction).toBe(retry + 1);
      expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "failed", semanticRetryCount: retry });
      // The retry ran in the episode's one job ("episode:<episodeId>"), which is gone.
      expect((await t.jobs()).filter((j) => j.key === `episode:${episodeId}`)).toEqual([]);
    }
    h.clock.advance(10 * RETRY_INTERVAL_MS);
    expect((await sweep(h.svc.deps)).retriedExtractions).toBe(0);
    expect(calls().extraction).toBe(4);
    expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "failed", semanticRetryCount: 3 });
    expect((await t.episode(episodeId)).status).toBe("completed");
  });

  it("a retry that succeeds writes the facts once", async () => {
    const t = await tenant();
    let attempt = 0;
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], () => {
      attempt++;
      if (attempt === 1) throw new Error("flaky");
      return { facts: [fact("lives_in", "Lisbon", "I live in Lisbon")], entities: [{ name: "Lisbon", type: "PLACE" }] };
    });
    expect((await semanticState(episodeId)).semanticStatus).toBe("failed");
    h.clock.advance(RETRY_INTERVAL_MS);
    await sweep(h.svc.deps);
    expect(await semanticState(episodeId)).toMatchObject({
      semanticStatus: "completed",
      semanticError: null,
      semanticRetryCount: 1,
    });
    expect((await facts(t)).map((f) => f.object)).toEqual(["Lisbon"]);
    // Running it again (by the job, the sweep or by hand) writes nothing more.
    expect(await processSemantic(h.svc.deps, episodeId)).toBe("skipped");
    h.clock.advance(RETRY_INTERVAL_MS);
    await sweep(h.svc.deps);
    expect(await facts(t)).toHaveLength(1);
    expect(await entities(t)).toHaveLength(1);
    expect(calls().extraction).toBe(2);
  });

  it("a failure between the model call and the write (the embedding batch) writes nothing; the retry writes once", async () => {
    const t = await tenant();
    const answer = {
      facts: [fact("lives_in", "Lisbon", "I live in Lisbon"), fact("likes", "jazz", "I like jazz")],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    };
    let attempt = 0;
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok", "I like jazz", "ok"], () => {
      // The next request, the facts' embedding batch, fails.
      if (++attempt === 1) h.fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
      return answer;
    });
    expect(await semanticState(episodeId)).toMatchObject({
      semanticStatus: "failed",
      semanticError: expect.stringMatching(/Embedding call failed/),
    });
    expect(await facts(t)).toEqual([]);
    expect(await entities(t)).toEqual([]);
    h.clock.advance(RETRY_INTERVAL_MS);
    await sweep(h.svc.deps);
    expect((await semanticState(episodeId)).semanticStatus).toBe("completed");
    expect((await facts(t)).map((f) => f.object)).toEqual(["jazz", "Lisbon"].sort((a, b) => a.localeCompare(b)));
    expect(await entities(t)).toHaveLength(1);
  });

  it("a failed write batch rolls back entirely (no fact, entity or invalidation); the retry writes once", async () => {
    const t = await tenant();
    await extract(t, ["I live in Paris", "ok"], {
      facts: [fact("lives_in", "Paris", "I live in Paris", { objectIsEntity: true })],
      entities: [{ name: "Paris", type: "PLACE" }],
    });
    await setSemantic(t, { contradictionBandMin: 0.1 });
    const answer = {
      facts: [
        fact("moved_to", "Lisbon", "I moved to Lisbon from Paris", { objectIsEntity: true }),
        fact("misses", "Paris", "I miss Paris", { objectIsEntity: true }),
      ],
      entities: [
        { name: "Lisbon", type: "PLACE" },
        { name: "Paris", type: "PLACE" },
      ],
    };
    let judged = 0;
    h.fake.onStructured("contradiction_judgement", async (request) => {
      // Once, between the candidate search and the write: the entity the new facts will link
      // to disappears, so the batch's link insert fails on its foreign key.
      if (++judged === 1) await db().execute(sql`DELETE FROM entities WHERE project_id = ${t.projectId}`);
      return judge((old, young) => old === "user lives_in Paris" && young === "user moved_to Lisbon")(request);
    });
    const { episodeId } = await extract(t, ["I moved to Lisbon from Paris", "ok", "I miss Paris", "ok"], answer);
    expect(await semanticState(episodeId)).toMatchObject({
      semanticStatus: "failed",
      semanticError: expect.stringMatching(/fact_entities|foreign key/),
    });
    expect(
      (await facts(t)).map((f) => `${f.predicate} ${f.object} ${f.invalidAt === null ? "live" : "invalid"}`),
    ).toEqual(["lives_in Paris live"]);
    expect(await entities(t)).toEqual([]);

    h.clock.advance(RETRY_INTERVAL_MS);
    await sweep(h.svc.deps);
    expect((await semanticState(episodeId)).semanticStatus).toBe("completed");
    expect(
      (await facts(t)).map((f) => `${f.predicate} ${f.object} ${f.invalidAt === null ? "live" : "invalid"}`),
    ).toEqual(["lives_in Paris invalid", "misses Paris live", "moved_to Lisbon live"]);
    expect((await entities(t)).map((e) => e.name)).toEqual(["Lisbon", "Paris"]);
    expect(calls().extraction).toBe(3);
  });

  it("running processSemantic twice, even at once, writes the facts once", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.conversation(threadId, ["I live in Lisbon", "ok"]);
    const { episodeId } = await t.end(threadId);
    // Summarise only: extraction is held back by a failing answer, then put back to pending.
    h.fake.onStructured("fact_extraction", () => ({}));
    await runDueJobs(h.svc.deps);
    await db().execute(sql`UPDATE episodes SET semantic_status = 'pending' WHERE id = ${episodeId}`);
    h.fake.onStructured("fact_extraction", () => ({
      facts: [fact("lives_in", "Lisbon", "I live in Lisbon")],
      entities: [],
    }));
    const outcomes = await Promise.all([
      processSemantic(h.svc.deps, episodeId as string),
      processSemantic(h.svc.deps, episodeId as string),
    ]);
    expect(outcomes.sort()).toEqual(["completed", "skipped"]);
    expect(await processSemantic(h.svc.deps, episodeId as string)).toBe("skipped");
    expect(await facts(t)).toHaveLength(1);
    expect(calls().extraction).toBe(2);
  });

  it("an attempt whose claim was taken over after its lease ran out writes nothing", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.conversation(threadId, ["I drink coffee every morning", "ok", "I drink tea at night", "ok"]);
    const { episodeId } = await t.end(threadId);
    const reached = gate();
    const hold = gate();
    let attempt = 0;
    h.fake.onStructured("fact_extraction", async () => {
      // The first (slow) attempt saw tea and water; the second saw coffee: a model answers
      // differently each time, so fact ids (episode and position) cannot tell the answers apart.
      if (++attempt === 1) {
        reached.open();
        await hold.opened;
        return {
          facts: [fact("drinks", "tea", "I drink tea at night"), fact("drinks", "water", "I drink tea at night")],
          entities: [],
        };
      }
      return { facts: [fact("drinks", "coffee", "I drink coffee every morning")], entities: [] };
    });
    const slow = runDueJobs(h.svc.deps);
    await reached.opened;
    h.clock.advance(LEASE_MS + 1);
    expect(await processSemantic(h.svc.deps, episodeId as string)).toBe("completed");
    hold.open();
    await slow;
    expect((await facts(t)).map((f) => f.object)).toEqual(["coffee"]);
    // The lost attempt did not mark the new owner's run failed.
    expect(await semanticState(episodeId as string)).toMatchObject({
      semanticStatus: "completed",
      semanticError: null,
    });
  });
});

describe("settings", () => {
  it("semantic enabled=false: the episode is summarised, extraction skipped, existing facts remain", async () => {
    const t = await tenant();
    await extract(t, ["I live in Lisbon", "ok"], {
      facts: [fact("lives_in", "Lisbon", "I live in Lisbon")],
      entities: [],
    });
    await setSemantic(t, { enabled: false });
    const before = await episodeCalls();
    const { episodeId } = await extract(t, ["I live in Porto now", "ok"], {
      facts: [fact("lives_in", "Porto", "I live in Porto now")],
      entities: [],
    });
    expect(await semanticState(episodeId)).toMatchObject({ status: "completed", semanticStatus: "skipped" });
    const after = await episodeCalls();
    expect(after.summary).toBe(before.summary + 1);
    expect(after.extraction).toBe(before.extraction);
    expect(after.embeddings).toBe(before.embeddings + 1);
    expect((await listFacts(t)).facts.map((f) => f.object)).toEqual(["Lisbon"]);
    // Nothing re-queues a skipped extraction.
    h.clock.advance(RETRY_INTERVAL_MS);
    expect((await sweep(h.svc.deps)).retriedExtractions).toBe(0);
  });

  it("disabling semantic memory stops a re-queued retry too", async () => {
    const t = await tenant();
    const { episodeId } = await extract(t, ["I live in Lisbon", "ok"], () => {
      throw new Error("down");
    });
    expect((await semanticState(episodeId)).semanticStatus).toBe("failed");
    await setSemantic(t, { enabled: false });
    h.fake.onStructured("fact_extraction", () => ({
      facts: [fact("lives_in", "Lisbon", "I live in Lisbon")],
      entities: [],
    }));
    h.clock.advance(RETRY_INTERVAL_MS);
    await sweep(h.svc.deps);
    expect((await semanticState(episodeId)).semanticStatus).toBe("skipped");
    expect(calls().extraction).toBe(1);
    expect(await facts(t)).toEqual([]);
  });

  it("threshold changes apply to new extractions only: existing rows are neither merged nor dropped", async () => {
    const t = await tenant();
    const a = factText("lives_in", "Lisbon");
    const b = factText("lives_in", "Lisbon Portugal");
    const c = factText("lives_in", "central Lisbon");
    const ab = await similarity(a, b);
    const cNearest = Math.max(await similarity(c, a), await similarity(c, b));
    const entityPair = await similarity("Acme Corp", "Acme Corporation");
    const entityNew = Math.max(
      await similarity("Acme Corporation Lda", "Acme Corp"),
      await similarity("Acme Corporation Lda", "Acme Corporation"),
    );
    // Under the defaults (dedup 0.95, entities 0.88) every one of these would stay apart.
    expect(Math.max(ab, cNearest)).toBeLessThan(0.95);
    expect(Math.max(entityPair, entityNew)).toBeLessThan(0.88);
    h.fake.onStructured(
      "contradiction_judgement",
      judge(() => false),
    );
    await extract(t, ["I live in Lisbon", "ok", "I work at Acme Corp", "ok"], {
      facts: [
        fact("lives_in", "Lisbon", "I live in Lisbon"),
        fact("works_at", "Acme Corp", "I work at Acme Corp", { objectIsEntity: true }),
      ],
      entities: [{ name: "Acme Corp", type: "ORG" }],
    });
    await extract(t, ["I live in Lisbon Portugal", "ok", "Acme Corporation pays me", "ok"], {
      facts: [
        fact("lives_in", "Lisbon Portugal", "I live in Lisbon Portugal"),
        fact("paid_by", "Acme Corporation", "Acme Corporation pays me", { objectIsEntity: true }),
      ],
      entities: [{ name: "Acme Corporation", type: "ORG" }],
    });
    const factsBefore = await facts(t);
    const entitiesBefore = await entities(t);
    const linksBefore = await links(t);
    expect(factsBefore.filter((f) => f.invalidAt === null)).toHaveLength(4);
    expect(entitiesBefore).toHaveLength(2);

    // Thresholds under which the existing pairs would now be one.
    await setSemantic(t, {
      factDedupThreshold: Math.min(ab, cNearest) - 0.001,
      contradictionBandMin: 0.05,
      entityResolutionThreshold: Math.min(entityPair, entityNew) - 0.001,
    });
    expect(await facts(t)).toEqual(factsBefore);
    expect(await entities(t)).toEqual(entitiesBefore);
    expect(await links(t)).toEqual(linksBefore);

    // A new extraction uses them: its near-duplicate fact is dropped, its near-named entity merges.
    const before = calls();
    await extract(t, ["I live in central Lisbon", "ok"], {
      facts: [fact("lives_in", "central Lisbon", "I live in central Lisbon")],
      entities: [{ name: "Acme Corporation Lda", type: "ORG" }],
    });
    expect(calls().judge).toBe(before.judge);
    expect(await facts(t)).toEqual(factsBefore);
    expect(await entities(t)).toEqual(entitiesBefore);
  });
});

describe("facts belong to the dataset", () => {
  it("a fact quoting a very long word, in a dataset with a long multi-byte name, is stored, counted without the word, and forgotten", async () => {
    // 256 CJK characters: 768 bytes of the keyword statistics' key before the term.
    const dataset = Array.from({ length: 256 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join("");
    // Random letters: a B-tree compresses a repetitive key below its limit.
    let seed = 7;
    const letter = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return String.fromCharCode(97 + (seed % 26));
    };
    const hash = Array.from({ length: 2_040 }, letter).join("");
    const t = await tenant();
    const quote = `My key is ${hash}`;
    const { episodeId } = await extract(
      t,
      [`Hi. ${quote} and I live in Lisbon.`, "ok"],
      {
        facts: [fact("has_key", hash, quote), fact("lives_in", "Lisbon", "I live in Lisbon")],
        entities: [],
      },
      { dataset },
    );
    expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "completed", semanticError: null });
    const stored = await facts(t);
    expect(stored.map((f) => f.predicate).sort()).toEqual(["has_key", "lives_in"]);
    const terms = async () =>
      rowsOf<{ longest: number; docs: number }>(
        await db().execute(sql`SELECT max(octet_length(term))::int AS longest,
          (SELECT docs::int FROM fact_terms WHERE project_id = ${t.projectId} AND term = '') AS docs
          FROM fact_terms WHERE project_id = ${t.projectId}`),
      )[0];
    expect(await terms()).toEqual({ longest: expect.any(Number), docs: 2 });
    expect((await terms()).longest).toBeLessThan(100);
    // Deleting the fact subtracts what was counted: the statistics match the one fact left.
    const key = stored.find((f) => f.predicate === "has_key");
    await db().execute(sql`DELETE FROM facts WHERE id = ${key?.id}`);
    expect((await terms()).docs).toBe(1);
  });

  it("outlive the deletion of their thread", async () => {
    const t = await tenant();
    const { threadId, episodeId } = await extract(t, ["I live in Lisbon", "ok"], {
      facts: [fact("lives_in", "Lisbon", "I live in Lisbon", { objectIsEntity: true })],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    });
    const before = await facts(t);
    await db().execute(sql`DELETE FROM threads WHERE id = ${threadId}`);
    expect((await t.get(`/v1/threads/${threadId}`)).status).toBe(404);
    expect(await facts(t)).toEqual(before);
    expect(before[0].episodeId).toBe(episodeId);
    expect((await links(t)).map((l) => l.link)).toEqual(["lives_in Lisbon -> Lisbon (PLACE)"]);
    expect((await listFacts(t)).facts.map((f) => f.object)).toEqual(["Lisbon"]);
  });

  it("an extraction retried after its thread was deleted completes without a model call", async () => {
    const t = await tenant();
    const { threadId, episodeId } = await extract(t, ["I live in Lisbon", "ok"], () => {
      throw new Error("down");
    });
    await db().execute(sql`DELETE FROM threads WHERE id = ${threadId}`);
    h.clock.advance(RETRY_INTERVAL_MS);
    await sweep(h.svc.deps);
    expect(await semanticState(episodeId)).toMatchObject({ semanticStatus: "completed", semanticError: null });
    expect(calls().extraction).toBe(1);
    expect(await facts(t)).toEqual([]);
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { EMBED_INPUT_CHARS } from "../../lib/evidence/embed";
import { EMBED_DEBOUNCE_MS } from "../../lib/evidence/write";
import { runDueJobs, sweep } from "../../lib/jobs/runner";
import { EPISODE_SUMMARY_PROMPT } from "../../lib/llm/prompts";
import { patchProjectSettings } from "../../lib/settings/store";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type Episode, gate, transcriptLines, useEpisodicService } from "../helpers/episodic-fixtures";
import { fakeEmbedding } from "../helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Issue 3, the episode pipeline: pending → processing → completed | failed, one Structured-Outputs
 * call and one embedding batch per episode, the transcript the provider receives (and its
 * truncation), provider failures, the background retry and the retry call.
 */
const { h, tenant, iso, request } = useEpisodicService();

const MINUTE = 60_000;

async function storedEmbedding(episodeId: string) {
  const [row] = rowsOf<{ dims: number | null; v: string | null }>(
    await h.svc.deps.db.execute(
      sql`SELECT vector_dims(embedding) AS dims, embedding::text AS v FROM episodes WHERE id = ${episodeId}`,
    ),
  );
  return { dims: row.dims === null ? null : Number(row.dims), vector: row.v ? (JSON.parse(row.v) as number[]) : null };
}

/** A thread of `contents` (alternating user/assistant), ended: its episode id. */
async function endedEpisode(t: Awaited<ReturnType<typeof tenant>>, contents: string[], episodic?: object) {
  const threadId = await t.thread("ds", episodic as Record<string, unknown> | undefined);
  await t.conversation(threadId, contents);
  const { episodeId } = await t.end(threadId);
  expect(episodeId).toEqual(expect.any(String));
  return episodeId as string;
}

/**
 * The provider's embedding calls, split: the thread's messages' (the `message-embed` job and the
 * batch before an episode: every input is an indexed message's text) and the rest (summaries, facts).
 */
async function embeddingCallsByKind() {
  const texts = new Set(
    rowsOf<{ content: string }>(
      await h.svc.deps.db.execute(
        sql`SELECT left(m.content, ${EMBED_INPUT_CHARS}) AS content FROM message_search s JOIN messages m ON m.id = s.message_id`,
      ),
    ).map((r) => r.content),
  );
  const calls = h.fake.embeddingCalls();
  const ofMessages = (c: { input: string[] }) => c.input.length > 0 && c.input.every((text) => texts.has(text));
  return { messages: calls.filter(ofMessages), episodes: calls.filter((c) => !ofMessages(c)) };
}

const summaryCallCount = () => h.fake.chatCalls("episode_summary").length;

describe("pipeline", () => {
  it("moves pending → processing → completed and fills every field", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    const messages = await t.conversation(threadId, ["I am planning a trip", "Where to?", "Lisbon by train"], 1000);
    h.clock.advance(MINUTE);
    const episodeId = (await t.end(threadId)).episodeId as string;
    const createdAt = iso();
    const pending = await t.episode(episodeId);
    expect(pending).toMatchObject({ status: "pending", summary: "", keyLearnings: [], processingStartedAt: null });
    expect((await storedEmbedding(episodeId)).vector).toBeNull();

    h.clock.advance(MINUTE);
    const processingStartedAt = iso();
    const reached = gate();
    const hold = gate();
    h.fake.onStructured("episode_summary", async () => {
      reached.open();
      await hold.opened;
      return { summary: "The user plans a train trip to Lisbon.", keyLearnings: ["likes trains", "visits Lisbon"] };
    });
    const running = runDueJobs(h.svc.deps);
    await reached.opened;
    expect(await t.episode(episodeId)).toMatchObject({
      status: "processing",
      processingStartedAt,
      processingCompletedAt: null,
      summary: "",
    });

    h.clock.advance(5000);
    hold.open();
    await running;
    const done = await t.episode(episodeId);
    expect(done).toEqual({
      episodeId,
      threadId,
      dataset: "ds",
      projectId: t.projectId,
      status: "completed",
      summary: "The user plans a train trip to Lisbon.",
      keyLearnings: ["likes trains", "visits Lisbon"],
      messageCount: 3,
      tokenCount: null,
      startedAt: messages[0].createdAt,
      endedAt: messages[2].createdAt,
      processingStartedAt,
      processingCompletedAt: iso(),
      error: null,
      retryCount: 0,
      metadata: { trigger: "end" },
      // Fact extraction ran too; the provider proposed no fact.
      extractionReport: {
        proposed: 0,
        kept: 0,
        dropped: { notAboutUser: 0, quoteNotFound: 0, emptyPart: 0, duplicate: 0, lowConfidence: 0 },
        invalidated: 0,
      },
      createdAt,
      updatedAt: iso(),
    } satisfies Episode);

    // The summary's embedding, in the configured size.
    const stored = await storedEmbedding(episodeId);
    expect(stored.dims).toBe(TEST_EMBEDDING_DIMENSIONS);
    const expected = fakeEmbedding(done.summary, TEST_EMBEDDING_DIMENSIONS);
    stored.vector?.forEach((v, i) => {
      // Stored at half precision (11 significant bits).
      expect(v).toBeCloseTo(expected[i], 3);
    });

    // Exactly one model call and one embedding batch for the episode.
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
    const embedded = await embeddingCallsByKind();
    expect(embedded.episodes).toEqual([
      expect.objectContaining({ input: [done.summary], dimensions: TEST_EMBEDDING_DIMENSIONS }),
    ]);
    // Besides it, the thread's user messages were embedded (their vectors for recall).
    expect(embedded.messages.length).toBeGreaterThan(0);
    for (const call of embedded.messages) expect(call.input).toEqual(["I am planning a trip", "Lisbon by train"]);
  });

  it("extracts facts after the summary, or skips extraction when semantic memory is disabled", async () => {
    const t = await tenant();
    const on = await endedEpisode(t, ["semantic on"]);
    await runDueJobs(h.svc.deps);
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { semantic: { enabled: false } });
    h.clock.advance(1000);
    const off = await endedEpisode(t, ["semantic off"]);
    await runDueJobs(h.svc.deps);
    const rows = rowsOf<{ id: string; status: string; semantic_status: string }>(
      await h.svc.deps.db.execute(
        sql`SELECT id, status, semantic_status FROM episodes WHERE id IN (${on}, ${off}) ORDER BY created_at`,
      ),
    );
    expect(rows).toEqual([
      { id: on, status: "completed", semantic_status: "completed" },
      { id: off, status: "completed", semantic_status: "skipped" },
    ]);
    // Not exposed by the API.
    expect(Object.keys(await t.episode(on))).not.toContain("semanticStatus");
  });

  it("makes one model call and one embedding batch per episode", async () => {
    const t = await tenant();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await endedEpisode(t, [`batch ${i} hello`, `batch ${i} bye`]));
    await runDueJobs(h.svc.deps);
    for (const id of ids) expect((await t.episode(id)).status).toBe("completed");
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(3);
    // Extraction found nothing here, so it embedded nothing: one batch per episode, the summary's
    // (besides the threads' messages' batches).
    const { episodes } = await embeddingCallsByKind();
    expect(episodes).toHaveLength(3);
    expect(episodes.map((c) => c.input)).toEqual(
      expect.arrayContaining([0, 1, 2].map((i) => [`batch ${i} hello batch ${i} bye`])),
    );
  });

  it("sends the transcript with roles and contents, one line per message, under the summary prompt", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.say(threadId, "Hi,\n  I need   help", "user");
    await t.say(threadId, "Sure. What with?", "assistant");
    await t.say(threadId, "Be concise.", "system");
    await t.say(threadId, '{"weather":"sunny"}', "tool");
    await t.end(threadId);
    await runDueJobs(h.svc.deps);

    const [call] = h.fake.chatCalls("episode_summary");
    expect(call.model).toBe("gpt-4o-mini");
    expect(call.response_format).toMatchObject({ type: "json_schema", json_schema: { name: "episode_summary" } });
    expect(call.messages).toEqual([
      { role: "system", content: EPISODE_SUMMARY_PROMPT },
      {
        role: "user",
        content: [
          "[1] user: Hi, I need help",
          "[2] assistant: Sure. What with?",
          "[3] system: Be concise.",
          '[4] tool: {"weather":"sunny"}',
        ].join("\n"),
      },
    ]);
  });

  describe("transcript truncation", () => {
    const numbered = (n: number) => Array.from({ length: n }, (_, i) => `msg${i + 1}`);
    const line = (seq: number) => `[${seq}] ${seq % 2 === 1 ? "user" : "assistant"}: msg${seq}`;
    const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => line(from + i));

    async function received(contents: string[], episodic?: object) {
      const t = await tenant();
      const id = await endedEpisode(t, contents, episodic);
      await runDueJobs(h.svc.deps);
      const episode = await t.episode(id);
      expect(episode.status).toBe("completed");
      expect(episode.messageCount).toBe(contents.length);
      expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
      return transcriptLines(h.fake.chatCalls("episode_summary")[0]);
    }

    it("keeps the first 20 messages, a marker, then the tail up to maxMessages", async () => {
      expect(await received(numbered(30), { maxMessages: 25 })).toEqual([
        ...lines(1, 20),
        "[... 5 messages omitted ...]",
        ...lines(26, 30),
      ]);
    });

    it("with the default maxMessages (100)", async () => {
      const got = await received(numbered(105));
      expect(got).toEqual([...lines(1, 20), "[... 5 messages omitted ...]", ...lines(26, 105)]);
    });

    it("with a small thread cap keeps both ends", async () => {
      expect(await received(numbered(10), { maxMessages: 4 })).toEqual([
        ...lines(1, 2),
        "[... 6 messages omitted ...]",
        ...lines(9, 10),
      ]);
    });

    it("with the project's maxMessages", async () => {
      const t = await tenant();
      await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { episodic: { maxMessages: 21 } });
      await endedEpisode(t, numbered(24));
      await runDueJobs(h.svc.deps);
      expect(transcriptLines(h.fake.chatCalls("episode_summary")[0])).toEqual([
        ...lines(1, 20),
        "[... 3 messages omitted ...]",
        line(24),
      ]);
    });

    it("sends everything, without a marker, when the transcript fits", async () => {
      expect(await received(numbered(25), { maxMessages: 25 })).toEqual(lines(1, 25));
    });
  });
});

describe("failures", () => {
  async function failedEpisode(t: Awaited<ReturnType<typeof tenant>>, episodic?: object) {
    const id = await endedEpisode(t, ["failing hello", "failing bye"], episodic);
    await runDueJobs(h.svc.deps);
    const episode = await t.episode(id);
    expect(episode.status).toBe("failed");
    return episode;
  }

  it("a provider error on the model call fails the episode with a readable error", async () => {
    const t = await tenant();
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const episode = await failedEpisode(t);
    expect(episode.error).toMatch(/^Model call \(episode_summary\) failed: provider answered 500/);
    expect(episode).toMatchObject({ summary: "", keyLearnings: [], retryCount: 0, processingCompletedAt: iso() });
    // No summary to embed (the thread's messages were, by their own job).
    expect((await embeddingCallsByKind()).episodes).toEqual([]);
    expect((await storedEmbedding(episode.episodeId)).vector).toBeNull();
    // The job is done with; only the retry brings the episode back.
    expect((await t.jobs()).filter((j) => j.kind === "episode")).toEqual([]);
  });

  it("a provider error on the embedding call fails the episode", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.conversation(threadId, ["failing hello", "failing bye"]);
    // The thread's messages get their vectors first (their job, once the thread is quiet), so the
    // one failure armed below hits the episode's own embedding call.
    h.clock.advance(EMBED_DEBOUNCE_MS);
    await runDueJobs(h.svc.deps);
    expect(h.fake.embeddingCalls().map((c) => c.input)).toEqual([["failing hello"]]);
    h.fake.fail({ status: 500, times: 1, endpoint: "embeddings" });
    const { episodeId } = await t.end(threadId);
    await runDueJobs(h.svc.deps);
    const episode = await t.episode(episodeId as string);
    expect(episode.status).toBe("failed");
    expect(episode.error).toMatch(/^Embedding call failed: provider answered 500/);
    expect(episode.summary).toBe("");
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(1);
    // The failed call was the summary's.
    const [, summaryCall] = h.fake.embeddingCalls();
    expect(summaryCall.input).toEqual(["failing hello failing bye"]);
    expect(h.fake.embeddingCalls()).toHaveLength(2);
  });

  it("an answer that does not match the schema fails the episode", async () => {
    const t = await tenant();
    h.fake.onStructured("episode_summary", () => ({ summary: 42 }));
    const episode = await failedEpisode(t);
    expect(episode.error).toBe("Model call (episode_summary) returned JSON that does not match the schema");
  });

  describe("without a provider (no OPENAI_API_KEY, no OPENAI_BASE_URL)", () => {
    let bare: TestService;
    beforeAll(async () => {
      bare = await createTestService({
        provider: h.fake,
        env: { OPENAI_API_KEY: "", OPENAI_BASE_URL: "" },
        manualTime: true,
      });
    });
    afterAll(() => bare.close());

    it("fails the episode with an error that says so and calls nobody", async () => {
      const t = await newTenant(bare);
      const created = await bare.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } });
      const { threadId } = (await created.json()) as { threadId: string };
      await bare.request(`/v1/memory/working/threads/${threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role: "user", content: "no key here" },
      });
      const ended = await bare.request(`/v1/threads/${threadId}/end`, { method: "POST", token: t.key });
      const { episodeId } = (await ended.json()) as { episodeId: string };
      await runDueJobs(bare.deps);
      const res = await bare.request(`/v1/memory/episodic/episodes/${episodeId}`, { token: t.key });
      const { episode } = (await res.json()) as { episode: Episode };
      expect(episode.status).toBe("failed");
      expect(episode.error).toBe(
        "No model provider is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server",
      );
      expect(h.fake.requests).toEqual([]);
    });

    it("a sweep logs the missing provider once, without a stack, however many jobs failed for it", async () => {
      const t = await newTenant(bare);
      for (const content of ["first thread", "second thread"]) {
        const created = await bare.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "ds" } });
        const { threadId } = (await created.json()) as { threadId: string };
        await bare.request(`/v1/memory/working/threads/${threadId}/messages`, {
          method: "POST",
          token: t.key,
          json: { role: "user", content },
        });
        await bare.request(`/v1/threads/${threadId}/end`, { method: "POST", token: t.key });
      }
      const lines: { level: string; message: string; fields?: Record<string, unknown> }[] = [];
      const log = bare.deps.log;
      bare.deps.log = {
        ...log,
        warn: (message, fields) => lines.push({ level: "warn", message, fields }),
        error: (message, fields) => lines.push({ level: "error", message, fields }),
      };
      try {
        const report = await sweep(bare.deps);
        expect(report.ran).toBeGreaterThanOrEqual(2);
      } finally {
        bare.deps.log = log;
      }
      expect(lines).toEqual([
        {
          level: "warn",
          message:
            "No model provider is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server. Background work failed for it in this sweep",
          fields: { failures: expect.any(Number), ran: expect.any(Number) },
        },
      ]);
      expect(lines[0].fields?.failures).toBeGreaterThanOrEqual(2);
      expect(h.fake.requests).toEqual([]);
    });
  });
});

describe("background retry", () => {
  it("runs every RETRY_INTERVAL_MS while retryCount < maxRetries (default 3), then the episode stays failed", async () => {
    const t = await tenant();
    const interval = h.svc.deps.config.retryIntervalMs;
    expect(interval).toBe(120_000);
    h.fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    const id = await endedEpisode(t, ["retry hello"]);
    await runDueJobs(h.svc.deps);
    expect(await t.episode(id)).toMatchObject({ status: "failed", retryCount: 0 });

    // Too early: the last failure is not a retry interval old.
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });
    for (let attempt = 1; attempt <= 3; attempt++) {
      h.clock.advance(interval - 1);
      expect((await sweep(h.svc.deps)).retried).toBe(0);
      expect(summaryCallCount()).toBe(attempt);
      h.clock.advance(1);
      const report = await sweep(h.svc.deps);
      expect(report.retried).toBe(1);
      expect(report.ran).toBeGreaterThanOrEqual(1);
      expect(await t.episode(id)).toMatchObject({ status: "failed", retryCount: attempt, updatedAt: iso() });
      expect(summaryCallCount()).toBe(1 + attempt);
    }

    // At the cap: never retried again.
    h.clock.advance(10 * interval);
    expect(await sweep(h.svc.deps)).toMatchObject({ retried: 0, backstop: 0, ran: 0 });
    const final = await t.episode(id);
    expect(final).toMatchObject({ status: "failed", retryCount: 3 });
    expect(final.error).toMatch(/provider answered 500/);
    expect(summaryCallCount()).toBe(4);
  });

  it("completes the episode when a retry succeeds", async () => {
    const t = await tenant();
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const id = await endedEpisode(t, ["flaky hello", "flaky bye"]);
    await runDueJobs(h.svc.deps);
    expect((await t.episode(id)).status).toBe("failed");
    h.clock.advance(h.svc.deps.config.retryIntervalMs);
    expect((await sweep(h.svc.deps)).retried).toBe(1);
    expect(await t.episode(id)).toMatchObject({
      status: "completed",
      retryCount: 1,
      error: null,
      summary: "flaky hello flaky bye",
    });
  });

  it("follows maxRetries from the thread override and from the project", async () => {
    const t = await tenant();
    h.fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    const never = await endedEpisode(t, ["never retried"], { maxRetries: 0 });
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { episodic: { maxRetries: 1 } });
    const once = await endedEpisode(t, ["retried once"]);
    await runDueJobs(h.svc.deps);
    for (let i = 0; i < 4; i++) {
      h.clock.advance(h.svc.deps.config.retryIntervalMs);
      await sweep(h.svc.deps);
    }
    expect(await t.episode(never)).toMatchObject({ status: "failed", retryCount: 0 });
    expect(await t.episode(once)).toMatchObject({ status: "failed", retryCount: 1 });
  });
});

describe("POST /v1/memory/episodic/episodes/:id/retry", () => {
  it("re-queues a failed episode now, bypassing the cap and the interval; the job completes it", async () => {
    const t = await tenant();
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const id = await endedEpisode(t, ["manual hello", "manual bye"], { maxRetries: 0 });
    await runDueJobs(h.svc.deps);
    expect(await t.episode(id)).toMatchObject({ status: "failed", retryCount: 0 });

    const res = await request(`/v1/memory/episodic/episodes/${id}/retry`, { method: "POST", token: t.key });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ episodeId: id, status: "pending" });
    await h.svc.settle();
    expect(h.svc.rings.filter((r) => r.key === `episode:${id}`).map((r) => r.runAt.toISOString())).toContain(iso());
    expect(await t.episode(id)).toMatchObject({ status: "pending", retryCount: 1 });

    // Due now, without waiting for the retry interval.
    await runDueJobs(h.svc.deps);
    expect(await t.episode(id)).toMatchObject({
      status: "completed",
      retryCount: 1,
      error: null,
      summary: "manual hello manual bye",
    });
  });

  it("can be repeated past maxRetries, one increment per call", async () => {
    const t = await tenant();
    h.fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    const id = await endedEpisode(t, ["stubborn"], { maxRetries: 1 });
    await runDueJobs(h.svc.deps);
    for (let i = 1; i <= 3; i++) {
      const res = await request(`/v1/memory/episodic/episodes/${id}/retry`, { method: "POST", token: t.key });
      expect(res.status).toBe(200);
      await runDueJobs(h.svc.deps);
      expect(await t.episode(id)).toMatchObject({ status: "failed", retryCount: i });
    }
    expect(summaryCallCount()).toBe(4);
  });
});

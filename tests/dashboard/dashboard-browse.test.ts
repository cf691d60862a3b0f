import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { runDueJobs } from "../../lib/jobs/runner";
import type { ApiSchema, Body } from "../helpers/api-types";
import { useDashboardService } from "../helpers/dashboard-fixtures";

/**
 * GET/POST/DELETE /dashboard/browse/*: datasets, a thread's messages (compacted rows and
 * summaries marked), episodes with their fact extraction, retry, facts, fact deletion, entities.
 * Real database through app.request(); statement counts where a route is one statement.
 */
const { h, tenant, call, get, measured, expectError, expectValidation, rows } = useDashboardService();

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const B = "/dashboard/browse";
const tick = (ms = 1000) => h.clock.advance(ms);

type Dataset = ApiSchema<"BrowseDataset">;
type MessagesPage = Body<"/dashboard/browse/threads/{id}/messages", "get", 200>;
type BrowseEpisode = ApiSchema<"BrowseEpisode">;
type BrowseFact = ApiSchema<"BrowseFact">;
type BrowseEntity = ApiSchema<"BrowseEntity">;

/** Every request of a route with its 400s: no projectId, bad paging. */
async function expectListValidation(path: string, query: string) {
  await expectValidation(await call(`${path}?${query}`.replace(/projectId=[^&]*&?/, "")), ["projectId"]);
  await expectValidation(await call(`${path}?${query}&limit=0`), ["limit"]);
  await expectValidation(await call(`${path}?${query}&limit=101`), ["limit"]);
  await expectValidation(await call(`${path}?${query}&limit=abc`), ["limit"]);
  await expectValidation(await call(`${path}?${query}&offset=-1`), ["offset"]);
}

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/browse/datasets", () => {
  it("lists every dataset with its counts, most recently active first, in one statement", async () => {
    const t = await tenant("browse-datasets");
    const other = await tenant("browse-datasets-other");
    await other.thread("alpha");
    // alpha: two threads, 10 + 1 messages, one compaction summary (not a message).
    const a1 = await t.thread("alpha");
    await t.conversation(
      a1,
      Array.from({ length: 10 }, (_, i) => `alpha message ${i}`),
    );
    const compacted = await t.get(`/v1/memory/working/threads/${a1}/compact`, { method: "POST" });
    expect(compacted.status).toBe(200);
    tick();
    const a2 = await t.thread("alpha");
    await t.say(a2, "one more");
    const alphaAt = h.clock.now().toISOString();
    // beta: facts (one superseded), an episode and a deleted one (not counted), no thread.
    tick(60_000);
    const e1 = await rows.entity(t.projectId, "beta", "Lisbon", "PLACE");
    await rows.fact(t.projectId, "beta", { predicate: "lives_in", object: "Lisbon", entities: [e1] });
    await rows.fact(t.projectId, "beta", {
      predicate: "lives_in",
      object: "Paris",
      invalidAt: h.clock.now().toISOString(),
    });
    await rows.episode(t.projectId, "beta");
    await rows.episode(t.projectId, "beta", { status: "deleted" });
    const betaAt = h.clock.now().toISOString();
    // gamma: only an entity, and the oldest activity.
    await rows.entity(t.projectId, "gamma", "Acme");
    await rows.query(sql`UPDATE entities SET created_at = '2025-01-01T00:00:00Z' WHERE dataset = 'gamma'`);

    const m = await measured(`${B}/datasets?projectId=${t.projectId}`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2); // the session, then one statement
    expect(JSON.parse(m.text)).toEqual({
      datasets: [
        {
          dataset: "beta",
          threads: 0,
          messages: 0,
          episodes: 1,
          facts: 2,
          liveFacts: 1,
          entities: 1,
          lastActivityAt: betaAt,
        },
        {
          dataset: "alpha",
          threads: 2,
          messages: 11,
          episodes: 0,
          facts: 0,
          liveFacts: 0,
          entities: 0,
          lastActivityAt: alphaAt,
        },
        {
          dataset: "gamma",
          threads: 0,
          messages: 0,
          episodes: 0,
          facts: 0,
          liveFacts: 0,
          entities: 1,
          lastActivityAt: "2025-01-01T00:00:00.000Z",
        },
      ],
      total: 3,
    });
    // The summary row exists (so "11" is the subtraction, not an absent summary).
    const [summaries] = await rows.query<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${a1} AND is_summary`,
    );
    expect(summaries.n).toBe(1);
  });

  it("pages with limit and offset, total beyond the page; an unknown project is empty", async () => {
    const t = await tenant("browse-datasets-paging");
    for (const name of ["d1", "d2", "d3"]) {
      tick();
      await t.thread(name);
    }
    const pages = [];
    for (const offset of [0, 2, 4]) {
      pages.push(
        await get<{ datasets: Dataset[]; total: number }>(
          `${B}/datasets?projectId=${t.projectId}&limit=2&offset=${offset}`,
        ),
      );
    }
    expect(pages.map((p) => p.total)).toEqual([3, 3, 3]);
    expect(pages.map((p) => p.datasets.map((d) => d.dataset))).toEqual([["d3", "d2"], ["d1"], []]);
  });

  it("400 without projectId or with bad paging, 401 without a session", async () => {
    const t = await tenant("browse-datasets-400");
    await expectListValidation(`${B}/datasets`, `projectId=${t.projectId}`);
    await expectError(
      await call(`${B}/datasets?projectId=${t.projectId}`, { token: null }),
      401,
      "Missing or invalid Authorization header",
    );
  });
});

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/browse/threads/{id}/messages", () => {
  async function compactedThread(name: string) {
    const t = await tenant(name);
    const threadId = await t.thread("ds");
    // 10 messages; compaction folds 1-4 (keeps the newest 6) into summary 11; then 12 and 13.
    await t.conversation(
      threadId,
      Array.from({ length: 10 }, (_, i) => `message ${i + 1}`),
    );
    const res = await t.get(`/v1/memory/working/threads/${threadId}/compact`, { method: "POST" });
    expect(await res.json()).toMatchObject({ compactedCount: 4, fromSequence: 1, toSequence: 4 });
    tick();
    await t.say(threadId, "message 12");
    await t.say(threadId, "message 13", "assistant");
    return { t, threadId };
  }

  it("pages every row newest page first, each page in reading order, compacted rows and the summary marked", async () => {
    const { t, threadId } = await compactedThread("browse-messages");
    const url = (q = "") => `${B}/threads/${threadId}/messages?projectId=${t.projectId}&limit=5${q}`;
    const m = await measured(url());
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const first = JSON.parse(m.text) as MessagesPage;
    expect(Object.keys(first).sort()).toEqual(["activeSummary", "messages", "nextCursor", "thread"]);
    expect(first.messages.map((x) => x.sequenceNumber)).toEqual([9, 10, 11, 12, 13]);
    expect(first.nextCursor).not.toBeNull();
    const second = await get<MessagesPage>(url(`&before=${first.nextCursor}`));
    expect(second.messages.map((x) => x.sequenceNumber)).toEqual([4, 5, 6, 7, 8]);
    const third = await get<MessagesPage>(url(`&before=${second.nextCursor}`));
    expect(third.messages.map((x) => x.sequenceNumber)).toEqual([1, 2, 3]);
    expect(third.nextCursor).toBeNull();

    const all = [...third.messages, ...second.messages, ...first.messages];
    expect(all.filter((x) => x.compacted).map((x) => x.sequenceNumber)).toEqual([1, 2, 3, 4]);
    expect(all.filter((x) => x.summary).map((x) => x.sequenceNumber)).toEqual([11]);
    for (const x of all) expect(x.compacted).toBe(x.compactedAt !== null);
    const summary = all.find((x) => x.summary);
    expect(summary).toMatchObject({ role: "system", compacted: false });
    expect(first.activeSummary).toEqual(summary);
    expect(third.activeSummary).toEqual(summary);

    // The records are the /v1 message records, plus the two marks.
    const v1 = await t.get(`/v1/memory/working/threads/${threadId}/messages?limit=100&order=asc`);
    const listed = ((await v1.json()) as { messages: Record<string, unknown>[] }).messages;
    expect(all.map(({ compacted: _c, summary: _s, ...rest }) => rest)).toEqual(listed);
    // The thread is the /v1 thread record.
    expect(first.thread).toEqual(await (await t.get(`/v1/threads/${threadId}`)).json());
  });

  it("defaults to 50 newest; a thread without a summary has activeSummary null; an empty thread is empty", async () => {
    const t = await tenant("browse-messages-default");
    const threadId = await t.thread("ds");
    await t.conversation(
      threadId,
      Array.from({ length: 55 }, (_, i) => `m${i + 1}`),
      10,
    );
    const page = await get<MessagesPage>(`${B}/threads/${threadId}/messages?projectId=${t.projectId}`);
    expect(page.messages).toHaveLength(50);
    expect(page.messages[0].sequenceNumber).toBe(6);
    expect(page.messages.at(-1)?.sequenceNumber).toBe(55);
    expect(page.activeSummary).toBeNull();
    expect(page.messages.every((x) => !x.compacted && !x.summary)).toBe(true);
    const empty = await t.thread("ds");
    expect(await get(`${B}/threads/${empty}/messages?projectId=${t.projectId}`)).toMatchObject({
      messages: [],
      activeSummary: null,
      nextCursor: null,
    });
    // Exactly `limit` rows left: no further page.
    const exact = await get<MessagesPage>(
      `${B}/threads/${threadId}/messages?projectId=${t.projectId}&before=6&limit=5`,
    );
    expect(exact.messages.map((x) => x.sequenceNumber)).toEqual([1, 2, 3, 4, 5]);
    expect(exact.nextCursor).toBeNull();
  });

  it("404 Thread not found for an unknown thread or another project's; 400 for bad input", async () => {
    const t = await tenant("browse-messages-404");
    const other = await tenant("browse-messages-404-other");
    const theirs = await other.thread("ds");
    const mine = await t.thread("ds");
    const m = await measured(`${B}/threads/${theirs}/messages?projectId=${t.projectId}`);
    expect({ status: m.status, body: m.text }).toEqual({
      status: 404,
      body: JSON.stringify({ error: "Thread not found" }),
    });
    expect(m.statements).toHaveLength(2);
    await expectError(await call(`${B}/threads/thr_nope/messages?projectId=${t.projectId}`), 404, "Thread not found");
    await expectValidation(await call(`${B}/threads/${mine}/messages`), ["projectId"]);
    for (const before of ["abc", "-1", "1.5", "99999999999", "2147483648"]) {
      await expectValidation(await call(`${B}/threads/${mine}/messages?projectId=${t.projectId}&before=${before}`), [
        "before",
      ]);
    }
    await expectValidation(await call(`${B}/threads/${mine}/messages?projectId=${t.projectId}&limit=0`), ["limit"]);
    await expectValidation(await call(`${B}/threads/${mine}/messages?projectId=${t.projectId}&limit=101`), ["limit"]);
  });

  it("404 Thread not found for a thread of another dataset than the one named; its own answers as without one", async () => {
    const t = await tenant("browse-messages-dataset");
    const threadId = await t.thread("alpha");
    await t.say(threadId, "hello");
    const url = (dataset: string) =>
      `${B}/threads/${threadId}/messages?projectId=${t.projectId}&dataset=${encodeURIComponent(dataset)}`;
    // The dashboard's thread page names the dataset in its route: another one's is not this thread.
    const m = await measured(url("beta"));
    expect({ status: m.status, body: m.text }).toEqual({
      status: 404,
      body: JSON.stringify({ error: "Thread not found" }),
    });
    expect(m.statements).toHaveLength(2);
    await expectError(await call(url("Alpha")), 404, "Thread not found");
    const own = await get<MessagesPage>(url("alpha"));
    expect(own).toEqual(await get<MessagesPage>(`${B}/threads/${threadId}/messages?projectId=${t.projectId}`));
    expect(own.messages.map((x) => x.content)).toEqual(["hello"]);
    await expectValidation(await call(url("")), ["dataset"]);
  });
});

// -------------------------------------------------------------------------------------------------

/**
 * A completed episode of dataset `ds` whose fact extraction really failed (the answer does not fit
 * the schema), its jobs run.
 */
async function failedExtraction(t: Awaited<ReturnType<typeof tenant>>, conversation: string[]) {
  h.fake.onStructured("fact_extraction", () => ({ wrong: true }));
  const th = await t.thread("ds");
  await t.conversation(th, conversation);
  const { episodeId } = await t.end(th);
  await runDueJobs(h.svc.deps);
  return episodeId as string;
}

describe("GET /dashboard/browse/episodes", () => {
  it("lists episodes newest first with their extraction, never deleted ones, in one statement", async () => {
    const t = await tenant("browse-episodes");
    const other = await tenant("browse-episodes-other");
    await rows.episode(other.projectId, "ds");
    const at = (minutes: number) => new Date(Date.UTC(2026, 0, 1, 0, minutes)).toISOString();
    const pending = await rows.episode(t.projectId, "ds", { status: "pending", createdAt: at(1) });
    const failed = await rows.episode(t.projectId, "ds", { status: "failed", createdAt: at(2) });
    const done = await rows.episode(t.projectId, "other-ds", {
      status: "completed",
      semanticStatus: "failed",
      semanticError: "bad answer",
      semanticRetryCount: 2,
      createdAt: at(3),
    });
    const archivedDone = await rows.episode(t.projectId, "ds", {
      status: "archived",
      semanticStatus: "completed",
      summarised: true,
      createdAt: at(4),
    });
    const archivedNever = await rows.episode(t.projectId, "ds", {
      status: "archived",
      summarised: false,
      createdAt: at(5),
    });
    await rows.episode(t.projectId, "ds", { status: "deleted", createdAt: at(6) });

    const m = await measured(`${B}/episodes?projectId=${t.projectId}`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const body = JSON.parse(m.text) as { episodes: BrowseEpisode[]; total: number };
    expect(body.total).toBe(5);
    expect(body.episodes.map((e) => e.episodeId)).toEqual([archivedNever, archivedDone, done, failed, pending]);
    const byId = new Map(body.episodes.map((e) => [e.episodeId, e]));
    expect(byId.get(done)?.extraction).toEqual({ status: "failed", error: "bad answer", attempts: 3 });
    expect(byId.get(archivedDone)).toMatchObject({
      status: "archived",
      extraction: { status: "completed", error: null, attempts: 1 },
    });
    expect(byId.get(archivedNever)).toMatchObject({ status: "archived", extraction: null });
    expect(byId.get(pending)?.extraction).toBeNull();
    expect(byId.get(failed)?.extraction).toBeNull();

    // The records are the /v1 episode records plus `extraction`.
    for (const e of body.episodes) {
      const { extraction: _x, ...record } = e;
      expect(record).toEqual(await t.episode(e.episodeId));
    }

    // Filters and paging.
    const failedOnly = await get<{ episodes: BrowseEpisode[]; total: number }>(
      `${B}/episodes?projectId=${t.projectId}&status=failed`,
    );
    expect(failedOnly.episodes.map((e) => e.episodeId)).toEqual([failed]);
    expect(failedOnly.total).toBe(1);
    const archived = await get<{ episodes: BrowseEpisode[]; total: number }>(
      `${B}/episodes?projectId=${t.projectId}&status=archived`,
    );
    expect(archived.episodes.map((e) => e.episodeId)).toEqual([archivedNever, archivedDone]);
    const ds = await get<{ episodes: BrowseEpisode[]; total: number }>(
      `${B}/episodes?projectId=${t.projectId}&dataset=other-ds`,
    );
    expect(ds.episodes.map((e) => e.episodeId)).toEqual([done]);
    const page = await get<{ episodes: BrowseEpisode[]; total: number }>(
      `${B}/episodes?projectId=${t.projectId}&limit=2&offset=2`,
    );
    expect(page).toMatchObject({ total: 5 });
    expect(page.episodes.map((e) => e.episodeId)).toEqual([done, failed]);
    expect(await get(`${B}/episodes?projectId=${t.projectId}&offset=5`)).toEqual({ episodes: [], total: 5 });
  });

  it("shows a real extraction failure, which /v1 hides", async () => {
    const t = await tenant("browse-episodes-real");
    const episodeId = await failedExtraction(t, ["I live in Lisbon", "Nice"]);
    const body = await get<{ episodes: BrowseEpisode[] }>(`${B}/episodes?projectId=${t.projectId}`);
    expect(body.episodes).toHaveLength(1);
    expect(body.episodes[0]).toMatchObject({
      episodeId,
      status: "completed",
      extraction: { status: "failed", attempts: 1 },
    });
    expect(body.episodes[0].extraction?.error).toEqual(expect.any(String));
    // /v1 shows no extraction status or error: only what a completed extraction kept and dropped
    // (extractionReport, null here).
    const v1 = JSON.stringify(await t.episode(episodeId));
    expect(v1).not.toMatch(/semantic|"extraction"|"error":"[^"]/i);
    expect(v1).toMatch(/"extractionReport":null/);
  });

  it("400 for a missing projectId, bad paging or an unknown status", async () => {
    const t = await tenant("browse-episodes-400");
    await expectListValidation(`${B}/episodes`, `projectId=${t.projectId}`);
    for (const status of ["deleted", "done", ""]) {
      await expectValidation(await call(`${B}/episodes?projectId=${t.projectId}&status=${status}`), ["status"]);
    }
  });
});

describe("POST /dashboard/browse/episodes/{id}/retry", () => {
  it("re-queues a failed episode and answers it as it now is; the job then completes it", async () => {
    const t = await tenant("browse-retry");
    // Twice: a 400 to the JSON-schema call is taken for a server without it, and asked in JSON mode.
    h.fake.fail({ status: 400, times: 2, endpoint: "chat" });
    const th = await t.thread("ds");
    await t.conversation(th, ["I like tea", "Noted"]);
    const { episodeId } = await t.end(th);
    await runDueJobs(h.svc.deps);
    expect((await t.episode(episodeId as string)).status).toBe("failed");

    tick(5000);
    const m = await measured(`${B}/episodes/${episodeId}/retry?projectId=${t.projectId}`, { method: "POST" });
    expect(m.status, m.text).toBe(200);
    // The session, the /v1 retry's statement, then the episode read.
    expect(m.statements).toHaveLength(3);
    const { episode } = JSON.parse(m.text) as { episode: BrowseEpisode };
    expect(episode).toMatchObject({ episodeId, status: "pending", retryCount: 1, extraction: null });
    expect(episode.updatedAt).toBe(h.clock.now().toISOString());
    const [job] = await rows.query<{ run_at: Date }>(
      sql`SELECT run_at FROM jobs WHERE key = ${`episode:${episodeId}`}`,
    );
    expect(new Date(job.run_at).toISOString()).toBe(h.clock.now().toISOString());

    await runDueJobs(h.svc.deps);
    const after = await get<{ episodes: BrowseEpisode[] }>(`${B}/episodes?projectId=${t.projectId}`);
    expect(after.episodes[0]).toMatchObject({ episodeId, status: "completed", extraction: { status: "completed" } });

    // Only failed episodes: the /v1 rule and message.
    await expectError(
      await call(`${B}/episodes/${episodeId}/retry?projectId=${t.projectId}`, { method: "POST" }),
      400,
      "Only failed episodes can be retried",
    );
  });

  it("re-queues a completed episode's failed fact extraction, past the retry cap; the job then extracts", async () => {
    const t = await tenant("browse-retry-extraction");
    const episodeId = await failedExtraction(t, ["I like tea", "Noted"]);
    // The sweep's three retries are spent (the spec's fixed cap): only an operator retries it now.
    await rows.query(sql`UPDATE episodes SET semantic_retry_count = 3 WHERE id = ${episodeId}`);
    const before = await get<{ episodes: BrowseEpisode[] }>(`${B}/episodes?projectId=${t.projectId}`);
    expect(before.episodes[0]).toMatchObject({ episodeId, status: "completed", extraction: { status: "failed" } });

    h.fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
    tick(5000);
    const m = await measured(`${B}/episodes/${episodeId}/retry?projectId=${t.projectId}`, { method: "POST" });
    expect(m.status, m.text).toBe(200);
    // The session, the /v1 retry (which takes failed episodes only), the extraction's, the read.
    expect(m.statements).toHaveLength(4);
    const { episode } = JSON.parse(m.text) as { episode: BrowseEpisode };
    expect(episode).toMatchObject({ episodeId, status: "completed", extraction: { status: "pending", attempts: 4 } });

    await runDueJobs(h.svc.deps);
    const after = await get<{ episodes: BrowseEpisode[] }>(`${B}/episodes?projectId=${t.projectId}`);
    expect(after.episodes[0]).toMatchObject({ episodeId, status: "completed", extraction: { status: "completed" } });
    // Neither failed now: the /v1 rule and message.
    await expectError(
      await call(`${B}/episodes/${episodeId}/retry?projectId=${t.projectId}`, { method: "POST" }),
      400,
      "Only failed episodes can be retried",
    );
  });

  it("404 Episode not found for an unknown or another project's episode; 400 without projectId", async () => {
    const t = await tenant("browse-retry-404");
    const other = await tenant("browse-retry-404-other");
    const theirs = await rows.episode(other.projectId, "ds", { status: "failed", summarised: false });
    await expectError(
      await call(`${B}/episodes/${theirs}/retry?projectId=${t.projectId}`, { method: "POST" }),
      404,
      "Episode not found",
    );
    const [row] = await rows.query<{ status: string }>(sql`SELECT status FROM episodes WHERE id = ${theirs}`);
    expect(row.status).toBe("failed");
    await expectError(
      await call(`${B}/episodes/epi_nope/retry?projectId=${t.projectId}`, { method: "POST" }),
      404,
      "Episode not found",
    );
    await expectValidation(await call(`${B}/episodes/${theirs}/retry`, { method: "POST" }), ["projectId"]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/browse/facts", () => {
  it("lists a dataset's live facts newest validAt first with createdAt and entities, in one statement", async () => {
    const t = await tenant("browse-facts");
    const other = await tenant("browse-facts-other");
    await rows.fact(other.projectId, "ds", { predicate: "likes", object: "elsewhere" });
    await rows.fact(t.projectId, "other-ds", { predicate: "likes", object: "another dataset" });
    const lisbon = await rows.entity(t.projectId, "ds", "Lisbon", "PLACE");
    const acme = await rows.entity(t.projectId, "ds", "acme", "ORG");
    const day = (d: number) => new Date(Date.UTC(2025, 0, d)).toISOString();
    const old = await rows.fact(t.projectId, "ds", {
      predicate: "lived_in",
      object: "Paris",
      validAt: day(1),
      invalidAt: day(20),
    });
    const lives = await rows.fact(t.projectId, "ds", {
      predicate: "lives_in",
      object: "Lisbon",
      validAt: day(10),
      entities: [lisbon, acme],
      createdAt: "2025-02-01T10:00:00.000Z",
    });
    const works = await rows.fact(t.projectId, "ds", {
      predicate: "works_at",
      object: "Acme",
      validAt: day(15),
      entities: [acme],
    });

    const m = await measured(`${B}/facts?projectId=${t.projectId}&dataset=ds`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const body = JSON.parse(m.text) as { facts: BrowseFact[]; total: number };
    expect(body.total).toBe(2);
    expect(body.facts.map((f) => f.factId)).toEqual([works, lives]);
    const livesFact = body.facts[1];
    expect(livesFact.createdAt).toBe("2025-02-01T10:00:00.000Z");
    expect(livesFact.entities).toEqual([
      { entityId: acme, name: "acme", type: "ORG" },
      { entityId: lisbon, name: "Lisbon", type: "PLACE" },
    ]);
    expect(body.facts[0].createdAt).toMatch(ISO);

    // With superseded ones; the records are the /v1 records plus createdAt and entities.
    const all = await get<{ facts: BrowseFact[]; total: number }>(
      `${B}/facts?projectId=${t.projectId}&dataset=ds&includeInvalidated=true`,
    );
    expect(all.total).toBe(3);
    expect(all.facts.map((f) => f.factId)).toEqual([works, lives, old]);
    const v1 = await t.get("/v1/memory/semantic/datasets/ds/facts?includeInvalidated=true");
    const v1Facts = ((await v1.json()) as { facts: unknown[] }).facts;
    expect(all.facts.map(({ createdAt: _c, entities: _e, ...f }) => f)).toEqual(v1Facts);

    const page = await get<{ facts: BrowseFact[]; total: number }>(
      `${B}/facts?projectId=${t.projectId}&dataset=ds&includeInvalidated=true&limit=1&offset=2`,
    );
    expect(page).toMatchObject({ total: 3 });
    expect(page.facts.map((f) => f.factId)).toEqual([old]);
    expect(await get(`${B}/facts?projectId=${t.projectId}&dataset=nothing`)).toEqual({ facts: [], total: 0 });
  });

  it("400 without projectId or dataset, with bad paging or a bad includeInvalidated", async () => {
    const t = await tenant("browse-facts-400");
    await expectListValidation(`${B}/facts`, `projectId=${t.projectId}&dataset=ds`);
    await expectValidation(await call(`${B}/facts?projectId=${t.projectId}`), ["dataset"]);
    await expectValidation(await call(`${B}/facts?projectId=${t.projectId}&dataset=ds&includeInvalidated=maybe`), [
      "includeInvalidated",
    ]);
  });
});

describe("DELETE /dashboard/browse/facts/{id}", () => {
  it("removes the fact and its entity links permanently, and nothing else", async () => {
    const t = await tenant("browse-delete-fact");
    const lisbon = await rows.entity(t.projectId, "ds", "Lisbon", "PLACE");
    const doomed = await rows.fact(t.projectId, "ds", { predicate: "lives_in", object: "Lisbon", entities: [lisbon] });
    const kept = await rows.fact(t.projectId, "ds", { predicate: "likes", object: "Lisbon", entities: [lisbon] });
    const m = await measured(`${B}/facts/${doomed}?projectId=${t.projectId}`, { method: "DELETE" });
    expect({ status: m.status, body: m.text }).toEqual({ status: 204, body: "" });
    expect(m.statements).toHaveLength(2);
    const left = await rows.query<{ id: string }>(sql`SELECT id FROM facts WHERE project_id = ${t.projectId}`);
    expect(left.map((r) => r.id)).toEqual([kept]);
    const links = await rows.query<{ fact_id: string }>(
      sql`SELECT fact_id FROM fact_entities WHERE entity_id = ${lisbon}`,
    );
    expect(links.map((r) => r.fact_id)).toEqual([kept]);
    const [entity] = await rows.query<{ n: number }>(sql`SELECT count(*)::int AS n FROM entities WHERE id = ${lisbon}`);
    expect(entity.n).toBe(1);
    // Gone for good: recall, the /v1 list (even with superseded ones) and a second delete.
    const v1 = await t.get("/v1/memory/semantic/datasets/ds/facts?includeInvalidated=true");
    expect(((await v1.json()) as { facts: { factId: string }[] }).facts.map((f) => f.factId)).toEqual([kept]);
    await expectError(
      await call(`${B}/facts/${doomed}?projectId=${t.projectId}`, { method: "DELETE" }),
      404,
      "Fact not found",
    );
  });

  it("404 Fact not found for another project's fact (which stays), 400 without projectId", async () => {
    const t = await tenant("browse-delete-404");
    const other = await tenant("browse-delete-404-other");
    const theirs = await rows.fact(other.projectId, "ds", { predicate: "likes", object: "tea" });
    await expectError(
      await call(`${B}/facts/${theirs}?projectId=${t.projectId}`, { method: "DELETE" }),
      404,
      "Fact not found",
    );
    const [row] = await rows.query<{ n: number }>(sql`SELECT count(*)::int AS n FROM facts WHERE id = ${theirs}`);
    expect(row.n).toBe(1);
    await expectValidation(await call(`${B}/facts/${theirs}`, { method: "DELETE" }), ["projectId"]);
    expect((await rows.query<{ n: number }>(sql`SELECT count(*)::int AS n FROM facts WHERE id = ${theirs}`))[0].n).toBe(
      1,
    );
  });
});

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/browse/entities", () => {
  it("lists a dataset's entities by name with their live fact counts, in one statement", async () => {
    const t = await tenant("browse-entities");
    const zed = await rows.entity(t.projectId, "ds", "Zed", "PERSON");
    const acme = await rows.entity(t.projectId, "ds", "acme", "ORG");
    const bolt = await rows.entity(t.projectId, "ds", "Bolt", "PRODUCT");
    await rows.entity(t.projectId, "other-ds", "Aardvark");
    await rows.fact(t.projectId, "ds", { predicate: "works_at", object: "acme", entities: [acme] });
    await rows.fact(t.projectId, "ds", { predicate: "knows", object: "Zed", entities: [acme, zed] });
    await rows.fact(t.projectId, "ds", {
      predicate: "knew",
      object: "Zed",
      entities: [zed],
      invalidAt: "2025-01-01T00:00:00Z",
    });
    const m = await measured(`${B}/entities?projectId=${t.projectId}&dataset=ds`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    expect(JSON.parse(m.text)).toEqual({
      entities: [
        { entityId: acme, name: "acme", type: "ORG", facts: 2 },
        { entityId: bolt, name: "Bolt", type: "PRODUCT", facts: 0 },
        { entityId: zed, name: "Zed", type: "PERSON", facts: 1 },
      ],
      total: 3,
    });
    const page = await get<{ entities: BrowseEntity[]; total: number }>(
      `${B}/entities?projectId=${t.projectId}&dataset=ds&limit=1&offset=1`,
    );
    expect(page).toEqual({ entities: [{ entityId: bolt, name: "Bolt", type: "PRODUCT", facts: 0 }], total: 3 });
  });

  it("400 without projectId or dataset, or with bad paging", async () => {
    const t = await tenant("browse-entities-400");
    await expectListValidation(`${B}/entities`, `projectId=${t.projectId}&dataset=ds`);
    await expectValidation(await call(`${B}/entities?projectId=${t.projectId}`), ["dataset"]);
  });
});

describe("GET /dashboard/browse/entities/{id}/facts", () => {
  it("answers the entity and its linked facts (live unless asked), in one statement", async () => {
    const t = await tenant("browse-entity-facts");
    const acme = await rows.entity(t.projectId, "ds", "Acme", "ORG");
    const other = await rows.entity(t.projectId, "ds", "Other");
    const day = (d: number) => new Date(Date.UTC(2025, 0, d)).toISOString();
    const a = await rows.fact(t.projectId, "ds", {
      predicate: "works_at",
      object: "Acme",
      validAt: day(5),
      entities: [acme],
    });
    const b = await rows.fact(t.projectId, "ds", {
      predicate: "visits",
      object: "Acme",
      validAt: day(9),
      entities: [acme, other],
    });
    const gone = await rows.fact(t.projectId, "ds", {
      predicate: "worked_at",
      object: "Acme",
      validAt: day(1),
      invalidAt: day(4),
      entities: [acme],
    });
    await rows.fact(t.projectId, "ds", { predicate: "likes", object: "Other", entities: [other] });
    const m = await measured(`${B}/entities/${acme}/facts?projectId=${t.projectId}`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const body = JSON.parse(m.text) as { entity: unknown; facts: BrowseFact[] };
    expect(body.entity).toEqual({ entityId: acme, name: "Acme", type: "ORG" });
    expect(body.facts.map((f) => f.factId)).toEqual([b, a]);
    expect(body.facts[0].entities.map((e) => e.entityId).sort()).toEqual([acme, other].sort());
    const all = await get<{ facts: BrowseFact[] }>(
      `${B}/entities/${acme}/facts?projectId=${t.projectId}&includeInvalidated=true`,
    );
    expect(all.facts.map((f) => f.factId)).toEqual([b, a, gone]);
    // The same records as the facts list.
    const listed = await get<{ facts: BrowseFact[] }>(
      `${B}/facts?projectId=${t.projectId}&dataset=ds&includeInvalidated=true`,
    );
    for (const f of all.facts) expect(listed.facts).toContainEqual(f);
  });

  it("404 Entity not found for an unknown or another project's entity; 400 without projectId", async () => {
    const t = await tenant("browse-entity-404");
    const other = await tenant("browse-entity-404-other");
    const theirs = await rows.entity(other.projectId, "ds", "Theirs");
    const m = await measured(`${B}/entities/${theirs}/facts?projectId=${t.projectId}`);
    expect({ status: m.status, body: m.text }).toEqual({
      status: 404,
      body: JSON.stringify({ error: "Entity not found" }),
    });
    expect(m.statements).toHaveLength(2);
    await expectError(await call(`${B}/entities/ent_nope/facts?projectId=${t.projectId}`), 404, "Entity not found");
    await expectValidation(await call(`${B}/entities/${theirs}/facts`), ["projectId"]);
  });

  it("404 Entity not found for an entity of another dataset than the one named; its own answers as without one", async () => {
    const t = await tenant("browse-entity-dataset");
    const acme = await rows.entity(t.projectId, "alpha", "Acme", "ORG");
    await rows.fact(t.projectId, "alpha", { predicate: "works_at", object: "Acme", entities: [acme] });
    const url = (dataset: string) =>
      `${B}/entities/${acme}/facts?projectId=${t.projectId}&dataset=${encodeURIComponent(dataset)}`;
    const m = await measured(url("beta"));
    expect({ status: m.status, body: m.text }).toEqual({
      status: 404,
      body: JSON.stringify({ error: "Entity not found" }),
    });
    expect(m.statements).toHaveLength(2);
    const own = await get<{ facts: BrowseFact[] }>(url("alpha"));
    expect(own).toEqual(await get<{ facts: BrowseFact[] }>(`${B}/entities/${acme}/facts?projectId=${t.projectId}`));
    expect(own.facts).toHaveLength(1);
  });
});

// -------------------------------------------------------------------------------------------------

describe("every browse route", () => {
  it("answers 401 without a session, or with an API key", async () => {
    const t = await tenant("browse-401");
    const q = `projectId=${t.projectId}&dataset=ds`;
    const requests: [string, string][] = [
      ["GET", `${B}/datasets?${q}`],
      ["GET", `${B}/threads?${q}`],
      ["GET", `${B}/threads/thr_x/messages?${q}`],
      ["GET", `${B}/episodes?${q}`],
      ["POST", `${B}/episodes/epi_x/retry?${q}`],
      ["GET", `${B}/facts?${q}`],
      ["DELETE", `${B}/facts/fct_x?${q}`],
      ["GET", `${B}/entities?${q}`],
      ["GET", `${B}/entities/ent_x/facts?${q}`],
    ];
    for (const [method, path] of requests) {
      await expectError(await call(path, { method, token: null }), 401, "Missing or invalid Authorization header");
      await expectError(await call(path, { method, token: t.key }), 401, "Invalid session");
    }
  });

  it("are documented under the dashboard tag with the session credential", async () => {
    const doc = (await (await call("/openapi.json", { token: null })).json()) as {
      paths: Record<string, Record<string, { tags: string[]; security: unknown }>>;
    };
    const expected = [
      ["get", "/dashboard/browse/datasets"],
      ["get", "/dashboard/browse/threads"],
      ["get", "/dashboard/browse/threads/{id}/messages"],
      ["get", "/dashboard/browse/episodes"],
      ["post", "/dashboard/browse/episodes/{id}/retry"],
      ["get", "/dashboard/browse/facts"],
      ["delete", "/dashboard/browse/facts/{id}"],
      ["get", "/dashboard/browse/entities"],
      ["get", "/dashboard/browse/entities/{id}/facts"],
      ["get", "/dashboard/projects/{id}"],
      ["get", "/dashboard/projects/{id}/settings/fields"],
      ["delete", "/dashboard/projects/{id}/settings/{group}/{key}"],
      ["get", "/dashboard/projects/{id}/activity"],
      ["get", "/dashboard/projects/{id}/extraction-failures"],
      ["post", "/dashboard/projects/{id}/recall"],
    ];
    for (const [method, path] of expected) {
      expect({ path, method, op: doc.paths[path]?.[method] }).toMatchObject({
        path,
        method,
        op: { tags: ["Internal: dashboard"], security: [{ session: [] }] },
      });
    }
  });

  it("the paged lists answer the same pages as the full list (no row lost or repeated)", async () => {
    const t = await tenant("browse-pages");
    for (let i = 0; i < 7; i++) {
      tick();
      await rows.fact(t.projectId, "ds", { predicate: "likes", object: `thing ${i}`, validAt: "2025-01-01T00:00:00Z" });
      await rows.entity(t.projectId, "ds", `Entity ${i}`);
      await rows.episode(t.projectId, "ds", { createdAt: "2025-01-01T00:00:00Z" });
    }
    for (const [path, key] of [
      ["facts", "factId"],
      ["entities", "entityId"],
      ["episodes", "episodeId"],
    ] as const) {
      const full = await get<Record<string, Record<string, string>[]>>(
        `${B}/${path}?projectId=${t.projectId}&dataset=ds`,
      );
      const paged: string[] = [];
      for (const offset of [0, 3, 6]) {
        const page = await get<Record<string, Record<string, string>[]>>(
          `${B}/${path}?projectId=${t.projectId}&dataset=ds&limit=3&offset=${offset}`,
        );
        paged.push(...page[path].map((r) => r[key]));
      }
      expect(paged).toHaveLength(7);
      expect(paged).toEqual(full[path].map((r) => r[key]));
    }
  });
});

describe("the dashboard's offset lists: a page and its total in one statement", () => {
  it("projects, users, API keys and threads: one statement after the session; a page past the end still has its total", async () => {
    const t = await tenant("lists-one-statement");
    for (const dataset of ["a", "b", "c"]) await t.thread(dataset);
    for (const name of ["k1", "k2", "k3"]) {
      const res = await call("/dashboard/api-keys", { method: "POST", json: { name, projectId: t.projectId } });
      expect(res.status).toBe(201);
    }
    const lists = [
      ["/dashboard/projects?", "projects"],
      ["/dashboard/users?", "users"],
      [`/dashboard/api-keys?projectId=${t.projectId}&`, "apiKeys"],
      [`${B}/threads?projectId=${t.projectId}&`, "threads"],
    ] as const;
    for (const [path, key] of lists) {
      const all = JSON.parse((await measured(`${path}limit=100`)).text) as Record<string, unknown[]> & {
        total: number;
      };
      expect(all.total, path).toBe(all[key].length);
      expect(all.total, path).toBeGreaterThan(0);

      const first = await measured(`${path}limit=1`);
      expect(first.statements, path).toHaveLength(2); // the session, then the page with its total
      expect(JSON.parse(first.text)).toMatchObject({ [key]: [all[key][0]], total: all.total });

      const past = await measured(`${path}limit=1&offset=${all.total}`);
      expect(past.statements, path).toHaveLength(3); // no row to carry the total: one count more
      expect(JSON.parse(past.text)).toEqual({ [key]: [], total: all.total });
    }
  });

  it("a project's list answers 404 Project not found for an unknown project, and an empty page for one with no rows", async () => {
    const t = await tenant("lists-unknown-project");
    const empty = await tenant("lists-empty-project");
    const lists = [
      ["/dashboard/api-keys", "apiKeys"],
      ["/dashboard/webhooks", "endpoints"],
      [`${B}/datasets`, "datasets"],
      [`${B}/threads`, "threads"],
      [`${B}/episodes`, "episodes"],
      [`${B}/facts`, "facts"],
      [`${B}/entities`, "entities"],
    ] as const;
    for (const [path, key] of lists) {
      const unknown = await measured(`${path}?projectId=prj_unknown&dataset=ds`);
      expect({ path, status: unknown.status, body: JSON.parse(unknown.text) }).toEqual({
        path,
        status: 404,
        body: { error: "Project not found" },
      });
      // The check rides in the statement that reads the page (a second only where an empty page
      // has no row to carry the total).
      expect(unknown.statements.length, path).toBeLessThanOrEqual(3);
      const none = await measured(`${path}?projectId=${empty.projectId}&dataset=ds`);
      expect({ path, status: none.status }).toEqual({ path, status: 200 });
      const rowsOfEmpty = key === "apiKeys" ? 1 : 0; // the fixture's tenant holds its own key
      expect(JSON.parse(none.text)).toMatchObject({ [key]: expect.any(Array), total: rowsOfEmpty });
    }
    // The tenant with rows is unaffected.
    await t.thread("ds");
    expect(await get(`${B}/threads?projectId=${t.projectId}`)).toMatchObject({ total: 1 });
  });
});

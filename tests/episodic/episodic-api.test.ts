import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { runDueJobs } from "../../lib/jobs/runner";
import { processEpisode } from "../../lib/pipeline/run";
import type { Body, ValidationError } from "../helpers/api-types";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type Episode, gate, type Tenant, useEpisodicService } from "../helpers/episodic-fixtures";
import { fakeEmbedding } from "../helpers/fake-openai";

/** Issue 3, the episodic API under /v1/memory/episodic, against the spec's shapes and errors. */
const { h, tenant, request, json } = useEpisodicService();

const E = "/v1/memory/episodic";
const DAY = 86_400_000;

type Page = Body<"/v1/memory/episodic/datasets/{dataset}/episodes", "get", 200>;
type Ranked = Body<"/v1/memory/episodic/datasets/{dataset}/episodes/search", "get", 200>["episodes"][number];

const EPISODE_KEYS = [
  "createdAt",
  "dataset",
  "endedAt",
  "episodeId",
  "error",
  "extractionReport",
  "keyLearnings",
  "messageCount",
  "metadata",
  "processingCompletedAt",
  "processingStartedAt",
  "projectId",
  "retryCount",
  "startedAt",
  "status",
  "summary",
  "threadId",
  "tokenCount",
  "updatedAt",
];

const list = (t: Tenant, dataset: string, query = "") =>
  t.get(`${E}/datasets/${encodeURIComponent(dataset)}/episodes${query}`);
const search = (t: Tenant, dataset: string, query: string) =>
  t.get(`${E}/datasets/${encodeURIComponent(dataset)}/episodes/search${query}`);

/** One ended thread of `contents`, one second apart; processed unless `process` is false. */
async function makeEpisode(t: Tenant, dataset: string, contents: string[], process = true) {
  const threadId = await t.thread(dataset);
  await t.conversation(threadId, contents);
  const { episodeId } = await t.end(threadId);
  if (process) await runDueJobs(h.svc.deps);
  h.clock.advance(1000);
  return episodeId as string;
}

async function failedEpisode(t: Tenant, dataset: string, content: string) {
  h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
  const id = await makeEpisode(t, dataset, [content]);
  expect((await t.episode(id)).status).toBe("failed");
  return id;
}

function expectValidation(body: ValidationError, path: string[]) {
  expect(body.error).toBe("Validation error");
  expect(body.issues.map((i) => i.path)).toContainEqual(path);
}

const cosine = (a: number[], b: number[]) => a.reduce((s, v, i) => s + v * b[i], 0);

describe("GET /datasets/:dataset/episodes", () => {
  it("lists completed episodes of the dataset, 10 by default, endedAt descending, with total and hasMore", async () => {
    const t = await tenant();
    const other = await tenant("other");
    const ids = [];
    for (let i = 0; i < 12; i++) ids.push(await makeEpisode(t, "ds", [`listed ${i}`, `reply ${i}`]));
    await failedEpisode(t, "ds", "failed one");
    await makeEpisode(t, "ds-other", ["other dataset"]);
    await makeEpisode(other, "ds", ["other tenant"]);
    await makeEpisode(t, "ds", ["still pending"], false);

    const page = await json<Page>(await list(t, "ds"), 200);
    expect(page.total).toBe(12);
    expect(page.hasMore).toBe(true);
    expect(page.episodes.map((e) => e.episodeId)).toEqual(ids.slice(2).reverse());
    for (const e of page.episodes) {
      expect(Object.keys(e).sort()).toEqual(EPISODE_KEYS);
      expect(e).toMatchObject({ status: "completed", dataset: "ds", projectId: t.projectId, messageCount: 2 });
    }
    const ended = page.episodes.map((e) => Date.parse(e.endedAt as string));
    expect(ended).toEqual([...ended].sort((a, b) => b - a));
  });

  it("walks every page with the endedAt cursor, without gaps or repeats", async () => {
    const t = await tenant();
    const ids = [];
    for (let i = 0; i < 7; i++) ids.push(await makeEpisode(t, "walk", [`walk ${i}`]));
    const seen: string[] = [];
    const pages: [number, boolean][] = [];
    let before = "";
    for (let guard = 0; guard < 10; guard++) {
      const page = await json<Page>(await list(t, "walk", `?limit=3${before}`), 200);
      expect(page.total).toBe(7);
      seen.push(...page.episodes.map((e) => e.episodeId));
      pages.push([page.episodes.length, page.hasMore]);
      if (!page.hasMore) break;
      before = `&before=${encodeURIComponent(page.episodes.at(-1)?.endedAt as string)}`;
    }
    expect(pages).toEqual([
      [3, true],
      [3, true],
      [1, false],
    ]);
    expect(seen).toEqual([...ids].reverse());
  });

  it("walks episodes that ended at the same instant (a batch import's threads) with beforeId, none skipped", async () => {
    const t = await tenant();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await makeEpisode(t, "ties", [`tie ${i}`]));
    await h.svc.deps.db.execute(
      sql`UPDATE episodes SET ended_at = '2026-05-01T10:00:00.000Z' WHERE project_id = ${t.projectId} AND dataset = 'ties'`,
    );
    const walk = async (withId: boolean) => {
      const seen: string[] = [];
      let cursor = "";
      for (let guard = 0; guard < 10; guard++) {
        const page = await json<Page>(await list(t, "ties", `?limit=2${cursor}`), 200);
        seen.push(...page.episodes.map((e) => e.episodeId));
        if (!page.hasMore) break;
        const last = page.episodes.at(-1) as Episode;
        cursor = `&before=${encodeURIComponent(last.endedAt as string)}${withId ? `&beforeId=${last.episodeId}` : ""}`;
      }
      return seen;
    };
    expect(await walk(true)).toEqual([...ids].sort().reverse());
    // `before` alone (the spec's cursor) ends at the first page: the others ended at that instant.
    expect(await walk(false)).toHaveLength(2);
  });

  it("filters by status (default completed) and rejects archived, all and unknown values", async () => {
    const t = await tenant();
    const done = await makeEpisode(t, "ds", ["done"]);
    const failed = await failedEpisode(t, "ds", "broken");
    const pending = await makeEpisode(t, "ds", ["waiting"], false);
    const processing = await makeEpisode(t, "ds", ["working"], false);
    const byStatus = async (status: string) =>
      (await json<Page>(await list(t, "ds", `?status=${status}`), 200)).episodes.map((e) => e.episodeId);
    const reached = gate();
    const hold = gate();
    h.fake.onStructured("episode_summary", async () => {
      reached.open();
      await hold.opened;
      return { summary: "working", keyLearnings: [] };
    });
    const running = processEpisode(h.svc.deps, processing);
    await reached.opened;
    expect(await byStatus("processing")).toEqual([processing]);
    expect(await byStatus("completed")).toEqual([done]);
    expect(await byStatus("pending")).toEqual([pending]);
    expect(await byStatus("failed")).toEqual([failed]);
    expect((await json<Page>(await list(t, "ds"), 200)).episodes.map((e) => e.episodeId)).toEqual([done]);
    hold.open();
    await running;
    expect(await byStatus("completed")).toEqual([processing, done]);
    expect(await byStatus("processing")).toEqual([]);
    for (const status of ["archived", "all", "deleted", "COMPLETED", ""]) {
      expectValidation(await json<ValidationError>(await list(t, "ds", `?status=${status}`), 400), ["status"]);
    }
  });

  it("validates limit (1-50) and before (ISO datetime or date)", async () => {
    const t = await tenant();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await makeEpisode(t, "ds", [`limit ${i}`]));
    for (const limit of ["0", "51", "-1", "1.5", "ten"]) {
      expectValidation(await json<ValidationError>(await list(t, "ds", `?limit=${limit}`), 400), ["limit"]);
    }
    expect((await json<Page>(await list(t, "ds", "?limit=50"), 200)).episodes).toHaveLength(3);
    expect(await json<Page>(await list(t, "ds", "?limit=1"), 200)).toMatchObject({ total: 3, hasMore: true });

    for (const before of ["yesterday", "2026-13-01", "12345"]) {
      expectValidation(await json<ValidationError>(await list(t, "ds", `?before=${before}`), 400), ["before"]);
    }
    const all = (await json<Page>(await list(t, "ds"), 200)).episodes;
    const cursor = encodeURIComponent(all[1].endedAt as string);
    const older = await json<Page>(await list(t, "ds", `?before=${cursor}`), 200);
    expect(older.episodes.map((e) => e.episodeId)).toEqual([ids[0]]);
    expect(older).toMatchObject({ total: 3, hasMore: false });
    // A date means its midnight (UTC): everything here ended on 2026-01-01 or later.
    expect((await json<Page>(await list(t, "ds", "?before=2026-01-01"), 200)).episodes).toEqual([]);
    expect((await json<Page>(await list(t, "ds", "?before=2999-01-01"), 200)).episodes).toHaveLength(3);
    // An offset is honoured.
    const shifted = new Date(Date.parse(all[1].endedAt as string)).toISOString().replace("Z", "+00:00");
    expect(
      (await json<Page>(await list(t, "ds", `?before=${encodeURIComponent(shifted)}`), 200)).episodes,
    ).toHaveLength(1);
  });

  it("treats the dataset as an opaque, percent-encoded name; an unknown dataset is an empty list", async () => {
    const t = await tenant();
    const id = await makeEpisode(t, "team/a b?c", ["odd name"]);
    expect((await json<Page>(await list(t, "team/a b?c"), 200)).episodes.map((e) => e.episodeId)).toEqual([id]);
    expect(await json<Page>(await list(t, "team"), 200)).toEqual({ episodes: [], total: 0, hasMore: false });
  });
});

describe("GET /datasets/:dataset/episodes/search", () => {
  it("validates q (1-1000 characters) and limit (1-20)", async () => {
    const t = await tenant();
    await makeEpisode(t, "ds", ["searchable"]);
    const embeddingsBefore = h.fake.embeddingCalls().length;
    expectValidation(await json<ValidationError>(await search(t, "ds", ""), 400), ["q"]);
    expectValidation(await json<ValidationError>(await search(t, "ds", "?q="), 400), ["q"]);
    expectValidation(await json<ValidationError>(await search(t, "ds", `?q=${"x".repeat(1001)}`), 400), ["q"]);
    for (const limit of ["0", "21", "abc"]) {
      expectValidation(await json<ValidationError>(await search(t, "ds", `?q=x&limit=${limit}`), 400), ["limit"]);
    }
    // Rejected requests never reach the provider.
    expect(h.fake.embeddingCalls()).toHaveLength(embeddingsBefore);
    expect(
      (await json<{ episodes: Ranked[] }>(await search(t, "ds", `?q=${"x".repeat(1000)}`), 200)).episodes,
    ).toHaveLength(1);
    expect((await json<{ episodes: Ranked[] }>(await search(t, "ds", "?q=x&limit=20"), 200)).episodes).toHaveLength(1);
  });

  it("answers the route's own 500 when the query cannot be embedded", async () => {
    const t = await tenant();
    await makeEpisode(t, "ds", ["searchable"]);
    h.fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "embeddings" });
    try {
      expect(await json(await search(t, "ds", "?q=searchable"), 500)).toEqual({ error: "Failed to search episodes" });
    } finally {
      h.fake.clearFailures();
    }
    expect((await json<{ episodes: Ranked[] }>(await search(t, "ds", "?q=searchable"), 200)).episodes).toHaveLength(1);
  });

  it("returns at most 5 by default and 20 at most, completed episodes of the dataset only, with one embedding call", async () => {
    const t = await tenant();
    const other = await tenant("other");
    for (let i = 0; i < 22; i++) await makeEpisode(t, "ds", [`topic number ${i}`]);
    await failedEpisode(t, "ds", "topic failed");
    const archived = await makeEpisode(t, "ds", ["topic archived"]);
    expect((await t.get(`${E}/episodes/${archived}`, { method: "DELETE" })).status).toBe(200);
    await makeEpisode(t, "elsewhere", ["topic elsewhere"]);
    await makeEpisode(other, "ds", ["topic foreign"]);
    await makeEpisode(t, "ds", ["topic pending"], false);

    h.fake.reset();
    const res = await json<{ episodes: Ranked[] }>(await search(t, "ds", "?q=topic"), 200);
    expect(h.fake.embeddingCalls()).toEqual([
      expect.objectContaining({ input: ["topic"], dimensions: TEST_EMBEDDING_DIMENSIONS }),
    ]);
    expect(h.fake.chatCalls()).toEqual([]);
    expect(res.episodes).toHaveLength(5);
    for (const e of res.episodes) {
      expect(Object.keys(e).sort()).toEqual([...EPISODE_KEYS, "relevanceScore"].sort());
      expect(e).toMatchObject({ status: "completed", dataset: "ds", projectId: t.projectId });
      expect(e.summary).toMatch(/^topic number \d+$/);
    }
    const scores = res.episodes.map((e) => e.relevanceScore);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));

    const twenty = await json<{ episodes: Ranked[] }>(await search(t, "ds", "?q=topic&limit=20"), 200);
    expect(twenty.episodes).toHaveLength(20);
    const many = await json<{ episodes: Ranked[] }>(
      await search(t, "ds", "?q=topic%20pending%20failed%20archived"),
      200,
    );
    expect(many.episodes.map((e) => e.status)).not.toContain("pending");
    expect(many.episodes.every((e) => /^topic number/.test(e.summary))).toBe(true);
  });

  it("ranks by cosine × 0.7 + 1/(1 + days) × 0.3: recency can beat similarity, and the other way round", async () => {
    const t = await tenant();
    const oldClose = await makeEpisode(t, "ds", ["apple banana cherry"]);
    const oldFar = await makeEpisode(t, "ds", ["kiwi pear plum"]);
    h.clock.advance(10 * DAY);
    const newSimilar = await makeEpisode(t, "ds", ["apple banana grape"]);
    const newFar = await makeEpisode(t, "ds", ["zucchini"]);

    const query = "apple banana cherry";
    const q = fakeEmbedding(query, TEST_EMBEDDING_DIMENSIONS);
    const res = await json<{ episodes: Ranked[] }>(await search(t, "ds", `?q=${encodeURIComponent(query)}`), 200);
    const now = h.clock.now().getTime();
    const expected = res.episodes.map((e) => {
      const days = (now - Date.parse(e.endedAt as string)) / DAY;
      const similarity = cosine(q, fakeEmbedding(e.summary, TEST_EMBEDDING_DIMENSIONS));
      return { id: e.episodeId, similarity, score: similarity * 0.7 + (1 / (1 + days)) * 0.3 };
    });
    const byId = Object.fromEntries(expected.map((x) => [x.id, x]));
    // The fixture is meaningful: the older episode is the more similar one, the newer one wins.
    expect(byId[oldClose].similarity).toBeGreaterThan(byId[newSimilar].similarity + 0.2);
    expect(byId[newSimilar].score).toBeGreaterThan(byId[oldClose].score + 0.01);
    // ... and similarity still beats recency when the gap is large.
    expect(byId[oldClose].score).toBeGreaterThan(byId[newFar].score + 0.1);

    expect(res.episodes.map((e) => e.episodeId)).toEqual([newSimilar, oldClose, newFar, oldFar]);
    for (const e of res.episodes) expect(e.relevanceScore).toBeCloseTo(byId[e.episodeId].score, 5);
  });

  it("finds a dataset's episodes among many nearer ones of other projects and datasets", async () => {
    const t = await tenant();
    const noise = await tenant("noise");
    // Far more episodes than an HNSW scan returns (hnsw.ef_search = 40), all nearer to the query.
    const near = JSON.stringify(
      Array.from(
        { length: 150 },
        (_, i) => `[${fakeEmbedding(`needle haystack ${i}`, TEST_EMBEDDING_DIMENSIONS).join(",")}]`,
      ),
    );
    await h.svc.deps.db.execute(sql`
      INSERT INTO episodes (id, project_id, thread_id, dataset, status, summary, from_seq, to_seq, message_count,
        started_at, ended_at, embedding)
      SELECT 'epi_noise_' || p.id || '_' || g, p.id, 'thr_noise', d, 'completed', 'needle haystack', 1, 1, 1,
        now(), now(), (${near}::jsonb ->> (g - 1))::vector
      FROM (VALUES (${noise.projectId}, 'ds'), (${t.projectId}, 'other-ds')) AS p(id, d), generate_series(1, 150) g`);
    const mine = await makeEpisode(t, "ds", ["needle in a quiet corner far away"]);
    const res = await json<{ episodes: Ranked[] }>(await search(t, "ds", "?q=needle%20haystack"), 200);
    expect(res.episodes.map((e) => e.episodeId)).toEqual([mine]);
  });
});

describe("GET /episodes/:episodeId", () => {
  it("returns {episode}; 404 for an unknown id and for another tenant's episode", async () => {
    const t = await tenant();
    const other = await tenant("other");
    const id = await makeEpisode(t, "ds", ["get me"]);
    const theirs = await makeEpisode(other, "ds", ["not yours"]);
    const body = await json<{ episode: Episode }>(await t.get(`${E}/episodes/${id}`), 200);
    expect(Object.keys(body)).toEqual(["episode"]);
    expect(body.episode).toMatchObject({ episodeId: id, status: "completed", summary: "get me" });
    for (const missing of ["epi_unknown", theirs]) {
      expect(await json(await t.get(`${E}/episodes/${missing}`), 404)).toEqual({ error: "Episode not found" });
    }
    expect((await other.episode(theirs)).status).toBe("completed");
  });

  it("needs an API key", async () => {
    for (const path of [`${E}/episodes/epi_x`, `${E}/datasets/ds/episodes`, `${E}/datasets/ds/episodes/search?q=x`]) {
      const res = await request(path);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "Missing or invalid Authorization header" });
    }
  });
});

describe("DELETE /episodes/:episodeId", () => {
  it("archives: out of list and search, data kept; a second delete is 400; 404 when unknown or foreign", async () => {
    const t = await tenant();
    const other = await tenant("other");
    const keep = await makeEpisode(t, "ds", ["archive keep"]);
    const gone = await makeEpisode(t, "ds", ["archive gone"]);
    const theirs = await makeEpisode(other, "ds", ["archive theirs"]);
    expect((await json<Page>(await list(t, "ds"), 200)).total).toBe(2);

    const del = await t.get(`${E}/episodes/${gone}`, { method: "DELETE" });
    expect(await json(del, 200)).toEqual({ episodeId: gone, deleted: true });
    const archived = await t.episode(gone);
    expect(archived).toMatchObject({
      status: "archived",
      summary: "archive gone",
      keyLearnings: ["first: archive gone"],
    });
    const [stored] = rowsOf<{ dims: number }>(
      await h.svc.deps.db.execute(sql`SELECT vector_dims(embedding) AS dims FROM episodes WHERE id = ${gone}`),
    );
    expect(Number(stored.dims)).toBe(TEST_EMBEDDING_DIMENSIONS);

    const page = await json<Page>(await list(t, "ds"), 200);
    expect(page).toMatchObject({ total: 1, hasMore: false });
    expect(page.episodes.map((e) => e.episodeId)).toEqual([keep]);
    const found = await json<{ episodes: Ranked[] }>(await search(t, "ds", "?q=archive%20gone"), 200);
    expect(found.episodes.map((e) => e.episodeId)).toEqual([keep]);

    expect(await json(await t.get(`${E}/episodes/${gone}`, { method: "DELETE" }), 400)).toEqual({
      error: "Episode is already archived",
    });
    for (const missing of ["epi_unknown", theirs]) {
      expect(await json(await t.get(`${E}/episodes/${missing}`, { method: "DELETE" }), 404)).toEqual({
        error: "Episode not found",
      });
    }
    expect((await other.episode(theirs)).status).toBe("completed");
  });

  it("archives pending, failed and processing episodes; the pipeline does not bring them back", async () => {
    const t = await tenant();
    const failed = await failedEpisode(t, "ds", "archived while failed");
    const pending = await makeEpisode(t, "ds", ["archived while pending"], false);
    const processing = await makeEpisode(t, "ds", ["archived while processing"], false);
    for (const id of [pending, failed]) {
      expect((await t.get(`${E}/episodes/${id}`, { method: "DELETE" })).status).toBe(200);
    }

    const reached = gate();
    const hold = gate();
    h.fake.onStructured("episode_summary", async () => {
      reached.open();
      await hold.opened;
      return { summary: "too late", keyLearnings: [] };
    });
    const running = processEpisode(h.svc.deps, processing);
    await reached.opened;
    expect((await t.get(`${E}/episodes/${processing}`, { method: "DELETE" })).status).toBe(200);
    hold.open();
    expect(await running).toBe("skipped");
    await runDueJobs(h.svc.deps);
    for (const id of [pending, failed, processing]) expect((await t.episode(id)).status).toBe("archived");
    expect((await t.episode(processing)).summary).toBe("");
    // Archived episodes are not retried either.
    h.clock.advance(h.svc.deps.config.retryIntervalMs * 10);
    await runDueJobs(h.svc.deps);
    expect((await t.episode(failed)).status).toBe("archived");
  });
});

describe("POST /episodes/:episodeId/retry", () => {
  it("accepts failed episodes only: 400 for every other state, 404 when unknown or foreign", async () => {
    const t = await tenant();
    const other = await tenant("other");
    const completed = await makeEpisode(t, "ds", ["retry completed"]);
    const archived = await failedEpisode(t, "ds", "retry archived");
    await t.get(`${E}/episodes/${archived}`, { method: "DELETE" });
    const theirs = await failedEpisode(other, "ds", "retry theirs");
    const pending = await makeEpisode(t, "ds", ["retry pending"], false);

    for (const id of [completed, pending, archived]) {
      const before = await t.episode(id);
      expect(await json(await t.get(`${E}/episodes/${id}/retry`, { method: "POST" }), 400)).toEqual({
        error: "Only failed episodes can be retried",
      });
      expect(await t.episode(id)).toEqual(before);
    }
    for (const id of ["epi_unknown", theirs]) {
      expect(await json(await t.get(`${E}/episodes/${id}/retry`, { method: "POST" }), 404)).toEqual({
        error: "Episode not found",
      });
    }
    expect(await other.episode(theirs)).toMatchObject({ status: "failed", retryCount: 0 });
  });
});

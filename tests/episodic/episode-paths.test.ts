import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { vectorIndexName } from "../../lib/db/vector-indexes";
import { listEpisodes, listEpisodesSql } from "../../lib/episodic/episodes";
import { cutEpisodeSql } from "../../lib/episodic/triggers";
import { type Retrieval, recallSql, retrieve } from "../../lib/recall/retrieve";
import { type FakeOpenAI, fakeEmbedding, startFakeOpenAI } from "../helpers/fake-openai";
import { type PlanNode, planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Recall's episodes (`include: ["episodes"]`) and the episode search rank a dataset's completed
 * episodes by cosine × 0.7 + recency × 0.3. A dataset of a few episodes has every one scored; a
 * large one (many conversations: 10,000 episodes cost +48 ms a recall when each was scored) takes
 * its most recent and its nearest through the HNSW index, and must still find both kinds.
 */
let svc: TestService;
let fake: FakeOpenAI;
let dims: number;
beforeAll(async () => {
  fake = await startFakeOpenAI();
  // A database of its own: the path depends on the dataset's share of the episodes table.
  svc = await createTestService({ provider: fake });
  dims = svc.deps.config.openai.embeddingDimensions;
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});

const DAY = 86_400_000;
const QUERY = "a lighthouse on the northern cliffs";

/**
 * `count` completed episodes of `dataset`, "topic g" ended g + 2 days ago, and two that must lead
 * the ranking: the query's own text ended a year ago (similarity wins) and a far one ended now
 * (recency wins). Answers their ids.
 */
async function insertEpisodes(projectId: string, dataset: string, count: number) {
  const now = svc.deps.clock.now().getTime();
  const vector = (text: string) => `[${fakeEmbedding(text, dims).join(",")}]`;
  const rows = [
    ...Array.from({ length: count }, (_, g) => ({ g: String(g), s: `topic ${g}`, at: now - (g + 2) * DAY })),
    { g: "needle", s: QUERY, at: now - 365 * DAY },
    { g: "newest", s: "zucchini", at: now },
  ].map((r) => ({ ...r, at: new Date(r.at).toISOString(), v: vector(r.s) }));
  const prefix = `epi_ep_${randomUUID().slice(0, 8)}_`;
  await svc.deps.db.execute(sql`
    INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, summary, message_count,
      from_seq, to_seq, started_at, ended_at, embedding)
    SELECT ${prefix} || x.g, ${projectId}, 'thr_ep', ${dataset}, 'completed', 'completed', x.s, 1, 1, 1,
      x.at::timestamptz, x.at::timestamptz, x.v::halfvec
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(g text, s text, at text, v text)`);
  return { needle: `${prefix}needle`, newest: `${prefix}newest` };
}

const episodeRecall = (projectId: string, dataset: string): Retrieval => ({
  projectId,
  dataset,
  mode: "hybrid",
  query: QUERY,
  vector: fakeEmbedding(QUERY, dims),
  facts: true,
  episodes: true,
});

/** The plan's nodes but those under `skipped` subplans. */
const nodesBut = (node: PlanNode, skipped: string): PlanNode[] =>
  node["Subplan Name"] === skipped ? [] : [node, ...(node.Plans ?? []).flatMap((c) => nodesBut(c, skipped))];

/** The episode rows recall's statement read to rank them (every scan but the count's), and its indexes. */
async function rankingScans(r: Retrieval) {
  const plan = planOf(await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(svc.deps, r)}`));
  const scans = nodesBut(plan.Plan, "CTE episode_path").filter(
    (n) => (n["Actual Loops"] ?? 0) > 0 && n["Relation Name"] === "episodes",
  );
  return {
    indexes: scans.map((n) => n["Index Name"]),
    read: scans.reduce(
      (sum, n) => sum + ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 0),
      0,
    ),
  };
}

/** The dataset's top 3 by the spec's formula over every completed episode. */
async function exactTop3(projectId: string, dataset: string) {
  const q = `[${fakeEmbedding(QUERY, dims).join(",")}]`;
  const at = svc.deps.clock.now().toISOString();
  return rowsOf<{ id: string }>(
    await svc.deps.db.execute(sql`
      SELECT id FROM episodes WHERE project_id = ${projectId} AND dataset = ${dataset} AND status = 'completed'
      ORDER BY (1 - (embedding::vector(${sql.raw(String(dims))}) <=> ${q}::vector(${sql.raw(String(dims))}))) * 0.7
        + (1.0 / (1.0 + GREATEST(EXTRACT(EPOCH FROM (${at}::timestamptz - ended_at)) / 86400.0, 0))) * 0.3 DESC, id
      LIMIT 3`),
  ).map((r) => r.id);
}

describe("episodes ranked by the dataset's size", { timeout: 120_000 }, () => {
  it("a dataset of many episodes ranks its recent and its nearest, not every one, and finds both", async () => {
    const t = await newTenant(svc, `ep-${randomUUID().slice(0, 6)}`);
    const { needle, newest } = await insertEpisodes(t.projectId, "many", 600);
    await svc.deps.db.execute(sql`ANALYZE episodes`);
    const r = episodeRecall(t.projectId, "many");
    const scans = await rankingScans(r);
    expect(scans.indexes).toContain(vectorIndexName("episodes", dims));
    // Its candidates (40 recent, 40 nearest, each read once more by its key), not the 602 episodes.
    expect(scans.read).toBeLessThan(200);
    const found = (await retrieve(svc.deps, r)).episodes;
    expect(found?.episodeCount).toBe(602);
    const ids = found?.episodes.map((e) => e.episodeId);
    expect(ids?.slice(0, 2)).toEqual([needle, newest]);
    expect(ids).toEqual(await exactTop3(t.projectId, "many"));
    // The episode search ranks the same way, in its own statement.
    const res = await svc.app.request(
      `/v1/memory/episodic/datasets/many/episodes/search?q=${encodeURIComponent(QUERY)}&limit=3`,
      { headers: { authorization: `Bearer ${t.key}` } },
    );
    expect(res.status).toBe(200);
    const searched = (await res.json()) as { episodes: { episodeId: string }[] };
    expect(searched.episodes.map((e) => e.episodeId)).toEqual(ids);
  });

  it("a dataset of a few episodes beside many others scores every one of its own", async () => {
    const t = await newTenant(svc, `ep-${randomUUID().slice(0, 6)}`);
    const { needle, newest } = await insertEpisodes(t.projectId, "few", 20);
    await svc.deps.db.execute(sql`ANALYZE episodes`);
    const r = episodeRecall(t.projectId, "few");
    const scans = await rankingScans(r);
    expect(scans.indexes).not.toContain(vectorIndexName("episodes", dims));
    expect(scans.read).toBe(22);
    const found = (await retrieve(svc.deps, r)).episodes;
    expect(found?.episodeCount).toBe(22);
    expect(found?.episodes.map((e) => e.episodeId)).toEqual(await exactTop3(t.projectId, "few"));
    expect(found?.episodes.map((e) => e.episodeId).slice(0, 2)).toEqual([needle, newest]);
  });
});

describe("the episode list of a dataset of many episodes", { timeout: 120_000 }, () => {
  it("reads its page's rows and counts the total from the index, not every episode", async () => {
    const t = await newTenant(svc, `ep-${randomUUID().slice(0, 6)}`);
    await insertEpisodes(t.projectId, "listed", 2_000);
    // As autovacuum leaves a table this size: statistics, and pages marked all-visible.
    await svc.deps.db.execute(sql`VACUUM ANALYZE episodes`);
    const query = { dataset: "listed", limit: 10, status: "completed" as const };
    const plan = planOf(
      await svc.deps.db.execute(
        sql`EXPLAIN (ANALYZE, FORMAT JSON) ${listEpisodesSql(t.projectId, query, svc.deps.clock.now())}`,
      ),
    );
    const scans = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "episodes");
    const byType = Object.fromEntries(scans.map((n) => [n["Node Type"], n]));
    // The page: its 10 rows, the one that says there are more, and one that ends the last tie
    // group on endedAt (the order goes on by id).
    expect(byType["Index Scan"]?.["Actual Rows"]).toBeGreaterThanOrEqual(11);
    expect(byType["Index Scan"]?.["Actual Rows"]).toBeLessThanOrEqual(12);
    // The total: index entries only, no episode read.
    expect(byType["Index Only Scan"]?.["Actual Rows"]).toBe(2_002);
    expect(scans).toHaveLength(2);

    const listed = await listEpisodes({ deps: svc.deps, projectId: t.projectId }, query);
    expect(listed.total).toBe(2_002);
    expect(listed.hasMore).toBe(true);
    expect(listed.episodes.map((e) => e.summary)).toEqual([
      "zucchini",
      ...Array.from({ length: 9 }, (_, g) => `topic ${g}`),
    ]);
  });
});

describe("an episode cut of a long thread", { timeout: 120_000 }, () => {
  it("finds the thread's last message from the index, not by reading every message", async () => {
    const t = await newTenant(svc, "long-thread-cut");
    const threadId = `thr_cut_${randomUUID().slice(0, 8)}`;
    // 3,000 messages, all but the last already in an episode: the cut's range is one message.
    await svc.deps.db.execute(sql`
      INSERT INTO threads (id, project_id, dataset, last_seq, episode_seq) VALUES (${threadId}, ${t.projectId}, 'ds', 3000, 2999)`);
    await svc.deps.db.execute(sql`
      INSERT INTO messages (id, project_id, thread_id, seq, role, content, created_at)
      SELECT 'msg_cut_' || ${threadId} || '_' || g, ${t.projectId}, ${threadId}, g, 'user', 'words', now()
      FROM generate_series(1, 3000) AS g`);
    await svc.deps.db.execute(sql`ANALYZE messages`);
    const statement = cutEpisodeSql({
      projectId: t.projectId,
      threadId,
      trigger: "idle",
      episodeId: `epi_cut_${randomUUID().slice(0, 8)}`,
      now: svc.deps.clock.now().toISOString(),
    });
    const plan = planOf(await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`));
    const read = planNodes(plan.Plan)
      .filter((n) => n["Relation Name"] === "messages")
      .reduce(
        (sum, n) => sum + ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 0),
        0,
      );
    // The last message (seen) and the one of the range (span); a max() over a join read all 3,000.
    expect(read).toBeLessThanOrEqual(4);
    const [episode] = rowsOf<{ from_seq: number; to_seq: number }>(
      await svc.deps.db.execute(sql`SELECT from_seq, to_seq FROM episodes WHERE thread_id = ${threadId}`),
    );
    expect([episode.from_seq, episode.to_seq]).toEqual([3000, 3000]);
  });
});

import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { vectorIndexName } from "../../lib/db/vector-indexes";
import { MESSAGE_SCAN_MAX } from "../../lib/recall/messages";
import { type Retrieval, recallSql, retrieve } from "../../lib/recall/retrieve";
import { fakeEmbedding } from "../helpers/fake-openai";
import { insertIndexedMessages } from "../helpers/indexed-messages";
import { type PlanNode, planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Recall's messages in a small dataset (at most MESSAGE_SCAN_MAX) come from the dataset's own
 * rows: its nearest by exact distance over its own vectors, a word's messages from its own
 * search rows. The HNSW and keyword indexes span every tenant's messages, and a small dataset
 * among many read the others' through them (a quarter of a second among 100,000 messages,
 * bench/RESULTS.md). A larger dataset keeps the indexes; its count lags (messages are counted by
 * their thread's embedding job), so its rows decide. Shown with sequential scans off, where the
 * planner would otherwise scan these small tables; on PGlite and, under `npm run test:pg`, on the
 * server.
 */
let svc: TestService;
let dims: number;
beforeAll(async () => {
  svc = await createTestService();
  dims = svc.deps.config.openai.embeddingDimensions;
});
afterAll(async () => {
  await svc?.close();
});

/**
 * `texts` as user messages of one new thread in `dataset`, indexed and embedded as the thread's
 * jobs leave them; counted into the keyword statistics unless `counted` is false.
 */
async function seed(projectId: string, dataset: string, texts: string[], counted = true, into = svc) {
  const threadId = `thr_${randomUUID().replaceAll("-", "").slice(0, 20)}`;
  await into.deps.db.execute(sql`INSERT INTO threads (id, project_id, dataset, last_seq, live_count, last_message_at, created_at, updated_at)
    VALUES (${threadId}, ${projectId}, ${dataset}, ${texts.length}, ${texts.length}, now(), now(), now())`);
  const messages = texts.map((content, i) => ({ id: `msg_${threadId}_${i}`, content, ageSeconds: i }));
  await insertIndexedMessages(into.deps.db, { projectId, dataset, threadId, firstSeq: 1 }, messages, { counted, dims });
  return messages.map((m) => m.id);
}

/** Recall with messages in `dataset` (hybrid, or keyword without a vector): what it read, what it found. */
async function recallMessages(projectId: string, dataset: string, mode: "hybrid" | "keyword", on = svc) {
  const query = "lighthouse";
  const r: Retrieval = {
    projectId,
    dataset,
    mode,
    query,
    vector: mode === "hybrid" ? fakeEmbedding(query, dims) : undefined,
    facts: true,
    episodes: false,
    messages: true,
  };
  const plan = await on.deps.db.transaction(async (tx) => {
    await tx.execute(sql`SET LOCAL enable_seqscan = off`);
    return planOf(await tx.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON) ${recallSql(on.deps, r)}`)).Plan;
  });
  const ran = planNodes(plan).filter((n) => (n["Actual Loops"] ?? 0) > 0);
  const onTable = (table: string) => ran.filter((n) => n["Relation Name"] === table);
  const removed = (nodes: PlanNode[]) => nodes.reduce((sum, n) => sum + (n["Rows Removed by Filter"] ?? 0), 0);
  const found = await retrieve(on.deps, r);
  return {
    indexes: ran.flatMap((n) => n["Index Name"] ?? []),
    /** Rows of message_vectors its scans read and dropped: another dataset's. */
    otherVectors: removed(onTable("message_vectors")),
    messages: found.messages ?? [],
  };
}

const HNSW = () => vectorIndexName("message_vectors", dims);

describe("message candidates by dataset size", { timeout: 120_000 }, () => {
  it("a small dataset beside a larger one reads neither index, only its own rows", async () => {
    const t = await newTenant(svc, `ms-${randomUUID().slice(0, 6)}`);
    // The neighbour's messages are the nearest to the query and hold its word: the indexes,
    // walked for the small dataset, would read them first.
    await seed(
      t.projectId,
      "crowd",
      Array.from({ length: 300 }, (_, i) => `lighthouse ${i}`),
    );
    const [lighthouse, ...boats] = await seed(t.projectId, "small", [
      "we walked to the lighthouse at dusk",
      ...Array.from({ length: 20 }, (_, i) => `a boat named ${i}`),
    ]);
    for (const mode of ["hybrid", "keyword"] as const) {
      const { indexes, otherVectors, messages } = await recallMessages(t.projectId, "small", mode);
      expect(indexes).not.toContain(HNSW());
      expect(indexes).not.toContain("message_search_search_idx");
      expect(otherVectors).toBe(0);
      expect(messages[0]?.messageId).toBe(lighthouse);
      for (const m of messages) expect([lighthouse, ...boats]).toContain(m.messageId);
    }
    // Every candidate's cosine is exact: the vector signal of the best is its true similarity.
    const { messages } = await recallMessages(t.projectId, "small", "hybrid");
    const q = fakeEmbedding("lighthouse", dims);
    const v = fakeEmbedding("we walked to the lighthouse at dusk", dims);
    const cosine = q.reduce((s, x, i) => s + x * v[i], 0) / Math.hypot(...q) / Math.hypot(...v);
    expect(messages[0]?.signals.vector).toBeCloseTo(cosine, 2);
  });

  it("a dataset that is most of its table keeps the indexes; beside a crowd it reads its own rows", async () => {
    const own = await createTestService();
    try {
      const t = await newTenant(own, `ms-${randomUUID().slice(0, 6)}`);
      const [lighthouse] = await seed(
        t.projectId,
        "alone",
        ["we walked to the lighthouse at dusk", ...Array.from({ length: 299 }, (_, i) => `a boat named ${i}`)],
        true,
        own,
      );
      const paths = async () => {
        await own.deps.db.execute(sql`ANALYZE message_search`);
        const { indexes, messages } = await recallMessages(t.projectId, "alone", "hybrid", own);
        expect(messages[0]?.messageId).toBe(lighthouse);
        return { hnsw: indexes.includes(HNSW()), keywordIndex: indexes.includes("message_search_search_idx") };
      };
      // 300 of 300 (exactPathSql): the indexes hold little else.
      expect(await paths()).toEqual({ hnsw: true, keywordIndex: true });
      const crowd = await newTenant(own, `ms-${randomUUID().slice(0, 6)}`);
      await seed(
        crowd.projectId,
        "crowd",
        Array.from({ length: 3_000 }, (_, i) => `lighthouse ${i}`),
        true,
        own,
      );
      expect(await paths()).toEqual({ hnsw: false, keywordIndex: false });
    } finally {
      await own.close();
    }
  });

  it(`past ${MESSAGE_SCAN_MAX} counted messages a dataset keeps the HNSW and keyword indexes`, async () => {
    const t = await newTenant(svc, `ms-${randomUUID().slice(0, 6)}`);
    const [lighthouse] = await seed(t.projectId, "large", [
      "we walked to the lighthouse at dusk",
      ...Array.from({ length: MESSAGE_SCAN_MAX + 20 }, (_, i) => `a boat named ${i}`),
    ]);
    await svc.deps.db.execute(sql`ANALYZE message_vectors`);
    const { indexes, messages } = await recallMessages(t.projectId, "large", "hybrid");
    expect(indexes).toContain(HNSW());
    expect(indexes).toContain("message_search_search_idx");
    expect(indexes).not.toContain("message_vectors_dataset_idx");
    expect(messages[0]?.messageId).toBe(lighthouse);
  });

  it("a dataset whose messages are not counted yet is judged by its rows", async () => {
    const t = await newTenant(svc, `ms-${randomUUID().slice(0, 6)}`);
    const [lighthouse] = await seed(
      t.projectId,
      "fresh",
      [
        "we walked to the lighthouse at dusk",
        ...Array.from({ length: MESSAGE_SCAN_MAX + 20 }, (_, i) => `a boat ${i}`),
      ],
      false,
    );
    const { indexes, messages } = await recallMessages(t.projectId, "fresh", "keyword");
    expect(indexes).toContain("message_search_search_idx");
    expect(messages[0]?.messageId).toBe(lighthouse);
  });
});

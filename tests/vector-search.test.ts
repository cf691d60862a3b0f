import { randomUUID } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GENERIC_PLAN_HINT } from "../lib/db/generic-plan";
import { rowsOf } from "../lib/db/rows";
import { vectorIndexName } from "../lib/db/vector-indexes";
import {
  EF_SEARCH_MAX,
  EF_SEARCH_MIN,
  efSearchFor,
  efSearchSql,
  limitWithEfSearch,
  nearestSql,
} from "../lib/db/vectors";
import { TEST_EMBEDDING_DIMENSIONS } from "./helpers/constants";
import { type FakeOpenAI, fakeEmbedding, near, startFakeOpenAI } from "./helpers/fake-openai";
import { createTestService, newTenant, type TestService } from "./helpers/service";

/**
 * The vector search's candidate list (hnsw.ef_search) is set inside recall's one statement, sized
 * for the dataset: shown against the real database with a session list of 1 and no iterative
 * scan, where an HNSW scan yields at most one row unless the statement's own setting is in force
 * when the scan starts.
 */
const DIMS = TEST_EMBEDDING_DIMENSIONS;
let svc: TestService;
let fake: FakeOpenAI;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake });
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
const setSession = async (...settings: string[]) => {
  for (const setting of settings) await svc.deps.db.execute(sql.raw(setting));
};
afterEach(() => setSession("RESET hnsw.ef_search", "RESET enable_seqscan", "SET hnsw.iterative_scan = relaxed_order"));

const query = (text: string) => sql`${`[${fakeEmbedding(text, DIMS)}]`}::halfvec`;
const execute = async <T>(statement: SQL) => rowsOf<T>(await svc.deps.db.execute(statement));

/** A dataset of `count` facts, every one near the query "where is the lighthouse" and matching none of its words. */
async function datasetNearLighthouse(count: number) {
  const t = await newTenant(svc, `vectors-${randomUUID().slice(0, 6)}`);
  const base = fakeEmbedding("where is the lighthouse", DIMS);
  for (let i = 0; i < count; i++) {
    const v = near(base, 0.9 - i * 0.005, `fact ${i}`);
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding)
      VALUES (${`fct_v${i}_${randomUUID().slice(0, 8)}`}, ${t.projectId}, 'ds', 'user', 'owns', ${`boat ${i}`}, 0.9,
        ${`I own boat ${i}`}, now(), ${`[${v}]`}::halfvec)`);
  }
  return t;
}

/** An HNSW scan yields at most `hnsw.ef_search` rows without the iterative scan: a list of 1 shows whose setting the scan ran with. */
function narrowSession() {
  return setSession("SET hnsw.iterative_scan = off", "SET hnsw.ef_search = 1", "SET enable_seqscan = off");
}

describe("the HNSW candidate list (hnsw.ef_search) per search", () => {
  it("efSearchSql is efSearchFor in SQL", async () => {
    const counts = [0, 1, 7_999, 8_000, 8_001, 10_000, 99_999, 100_000, 199_999, 200_000, 200_001, 10_000_000];
    for (const facts of counts) {
      const [row] = await execute<{ ef: number }>(sql`SELECT ${efSearchSql(sql`${facts}::bigint`)} AS ef`);
      expect(Number(row.ef), `${facts} facts`).toBe(efSearchFor(facts));
    }
    expect(efSearchFor(0)).toBe(EF_SEARCH_MIN);
    expect(efSearchFor(10_000_000)).toBe(EF_SEARCH_MAX);
  });

  it("limitWithEfSearch's setting is in force when the index scan under its LIMIT starts, and ends with the statement", async () => {
    const t = await datasetNearLighthouse(12);
    const search = (limit: SQL) =>
      nearestSql({
        from: sql`facts f`,
        column: sql`f.embedding`,
        select: sql`f.id`,
        where: sql`f.project_id = ${t.projectId}`,
        query: query("where is the lighthouse"),
        dims: DIMS,
        limit,
      });
    await narrowSession();
    const plan = (await execute<Record<string, string>>(sql`EXPLAIN ${search(sql`10`)}`)).map(
      (r) => Object.values(r)[0],
    );
    expect(plan.join("\n")).toContain(vectorIndexName("facts", DIMS));
    // The session's list of 1: at most one row, however many are asked for.
    expect((await execute(search(sql`10`))).length).toBeLessThanOrEqual(1);
    // The statement's own list (at least the 10 rows it must yield).
    expect(await execute(search(limitWithEfSearch(sql`10`, sql`0`, DIMS)))).toHaveLength(10);
    const [after] = await execute<{ ef: string }>(sql`SELECT current_setting('hnsw.ef_search') AS ef`);
    expect(after.ef).toBe("1");
  });

  it("recall's vector signal runs with its own list: every fact comes back with a session list of 1", async () => {
    const t = await datasetNearLighthouse(12);
    await narrowSession();
    const res = await svc.request("/v1/memory/recall", {
      method: "POST",
      token: t.key,
      json: { dataset: "ds", query: "where is the lighthouse", limit: 12 },
    });
    const body = (await res.json()) as { facts: { signals?: unknown }[] | null; factCount: number };
    expect(res.status).toBe(200);
    expect(body.factCount).toBe(12);
  });
});

describe("recall's statement on the embedded database", () => {
  it("runs with its generic plan from its second call, ranking exactly as its first (custom) plan did", async () => {
    const t = await datasetNearLighthouse(40);
    await svc.deps.db.execute(sql`ANALYZE facts`);
    const recall = async () => {
      const res = await svc.request("/v1/memory/recall", {
        method: "POST",
        token: t.key,
        json: { dataset: "ds", query: "where is the lighthouse keeper", limit: 10, include: ["raw"] },
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { facts: { factId: string; relevanceScore: number }[] }).facts;
    };
    const first = await recall();
    expect(first).toHaveLength(10);
    for (let i = 0; i < 3; i++) expect(await recall()).toEqual(first);
    const [recallStatement] = await execute<{ generic: number; custom: number }>(sql`
      SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
      WHERE statement LIKE ${`${GENERIC_PLAN_HINT.trim()}%`} AND statement LIKE '%by_vector%'`);
    expect(recallStatement).toMatchObject({ custom: 0 });
    expect(recallStatement?.generic).toBeGreaterThanOrEqual(2);
  });
});

import { randomUUID } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GENERIC_PLAN_HINT } from "../../lib/db/generic-plan";
import { rowsOf } from "../../lib/db/rows";
import { vectorIndexName } from "../../lib/db/vector-indexes";
import {
  EF_SEARCH_MAX,
  EF_SEARCH_MIN,
  efSearchFor,
  efSearchSql,
  extraScanFor,
  extraScanSql,
  FACTS_AT_EF_MAX,
  limitWithEfSearch,
  type NearestSearch,
  nearestSql,
  searchLimitsFor,
} from "../../lib/db/vectors";
import { recallSql } from "../../lib/recall/retrieve";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, fakeEmbedding, near, startFakeOpenAI } from "../helpers/fake-openai";
import { type PlanNode, planNodes, planOf } from "../helpers/plan";
import { adminSession, createTestService, newTenant, type TestService } from "../helpers/service";
import { testPgUrl } from "../helpers/test-database";

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

/** The facts of `projectId` nearest the query "where is the lighthouse" (nearestSql with `limits`). */
const nearLighthouse = (projectId: string, limits: Pick<NearestSearch, "limit" | "scan">) =>
  nearestSql({
    from: sql`facts f`,
    column: sql`f.embedding`,
    select: sql`f.id`,
    where: sql`f.project_id = ${projectId}`,
    query: query("where is the lighthouse"),
    dims: DIMS,
    ...limits,
  });

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
    const search = (limit: SQL) => nearLighthouse(t.projectId, { limit });
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

async function explain(statement: SQL, analyze = false): Promise<PlanNode[]> {
  return planNodes(
    planOf(await execute(sql`EXPLAIN (FORMAT JSON${sql.raw(analyze ? ", ANALYZE" : "")}) ${statement}`)).Plan,
  );
}

describe("reading past the candidate list on a dataset larger than it can cover", () => {
  it("extraScanSql is extraScanFor in SQL", async () => {
    for (const facts of [
      0,
      100_000,
      FACTS_AT_EF_MAX - 1,
      FACTS_AT_EF_MAX,
      FACTS_AT_EF_MAX + 1,
      500_001,
      1_000_000,
      3_000_000,
    ]) {
      const extra = async (secondSearch: boolean) =>
        Number(
          (
            await execute<{ n: number }>(sql`SELECT ${extraScanSql(sql`${facts}::bigint`, sql`${secondSearch}`)} AS n`)
          )[0].n,
        );
      expect(await extra(true), `${facts} facts`).toBe(extraScanFor(facts));
      expect(await extra(false), `${facts} facts`).toBe(0);
    }
  });

  it("past FACTS_AT_EF_MAX facts the index scan reads a whole list more and keeps the nearest by exact distance", async () => {
    const t = await datasetNearLighthouse(12);
    const search = (facts: number) =>
      nearLighthouse(t.projectId, searchLimitsFor(sql`3`, sql`${facts}::bigint`, DIMS, sql`true`));
    await setSession("SET enable_seqscan = off");
    const readFromIndex = async (facts: number) =>
      (await explain(search(facts), true)).find((n) => n["Node Type"] === "Index Scan")?.["Actual Rows"];
    expect(await readFromIndex(FACTS_AT_EF_MAX)).toBe(3);
    expect(await readFromIndex(FACTS_AT_EF_MAX + 1)).toBe(12);
    const exact = await execute<{ id: string }>(sql`SELECT id FROM facts
      WHERE project_id = ${t.projectId} ORDER BY (embedding::vector(${sql.raw(String(DIMS))}) <=> ${query("where is the lighthouse")}::vector) + 0 LIMIT 3`);
    for (const facts of [FACTS_AT_EF_MAX, FACTS_AT_EF_MAX + 1]) {
      const rows = await execute<{ id: string; distance: number }>(search(facts));
      expect(rows.map((r) => r.id)).toEqual(exact.map((r) => r.id));
    }
  });

  it("sorts the rows it keeps: the planner would take a subquery's rows ordered by distance as sorted", async () => {
    const t = await datasetNearLighthouse(3);
    const search = (limits: Pick<NearestSearch, "limit" | "scan">) => nearLighthouse(t.projectId, limits);
    await setSession("SET enable_seqscan = off");
    const sortKeys = async (statement: SQL) =>
      (await explain(statement)).filter((n) => n["Node Type"] === "Sort").map((n) => n["Sort Key"]);
    expect(
      await sortKeys(search(searchLimitsFor(sql`2`, sql`${FACTS_AT_EF_MAX + 1}::bigint`, DIMS, sql`true`))),
    ).toEqual([["((scanned.distance + '0'::double precision))"]]);
    // Why "+ 0": ORDER BY distance over the scan's rows is no sort at all, so the iterative scan's
    // later batches would be kept in the order it yields them.
    expect(await sortKeys(sql`SELECT * FROM (${search({ limit: sql`5` })}) scanned ORDER BY distance LIMIT 2`)).toEqual(
      [],
    );
  });
});

describe("recall's second search (the project setting semantic.vectorSecondSearch)", () => {
  it("on by default: a dataset past FACTS_AT_EF_MAX reads a whole list past its 30 candidates; off, its 30", async () => {
    const t = await datasetNearLighthouse(40);
    // The dataset's size as recall reads it: the keyword signal's statistics (fact_terms' '' row).
    await svc.deps.db.execute(sql`UPDATE fact_terms SET docs = ${FACTS_AT_EF_MAX + 1}
      WHERE project_id = ${t.projectId} AND dataset = 'ds' AND term = ''`);
    const text = "where is the lighthouse";
    const statement = recallSql(svc.deps, {
      projectId: t.projectId,
      dataset: "ds",
      mode: "hybrid",
      query: text,
      vector: fakeEmbedding(text, DIMS),
      facts: true,
      episodes: false,
    });
    const readFromIndex = async () =>
      (await explain(statement, true)).find(
        (n) => n["Node Type"] === "Index Scan" && n["Index Name"] === vectorIndexName("facts", DIMS),
      )?.["Actual Rows"];
    expect(await readFromIndex()).toBe(40);
    const token = await adminSession(svc);
    const turn = async (vectorSecondSearch: boolean) => {
      const res = await svc.request(`/dashboard/projects/${t.projectId}/settings`, {
        method: "PATCH",
        token,
        json: { semantic: { vectorSecondSearch } },
      });
      expect(res.status).toBe(200);
    };
    await turn(false);
    expect(await readFromIndex()).toBe(30);
    await turn(true);
    expect(await readFromIndex()).toBe(40);
  });
});

// On a PostgreSQL server (TEST_PG_URL) node-postgres sends the statement unnamed, planned with its
// values at every call: the same ranking every time is what there is to check.
const onServer = Boolean(testPgUrl());
describe(`recall's statement on ${onServer ? "a PostgreSQL server" : "the embedded database"}`, () => {
  const title = onServer
    ? "ranks exactly the same at every call"
    : "runs with its generic plan from its second call, ranking exactly as its first (custom) plan did";
  it(title, async () => {
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
    if (onServer) return;
    const [recallStatement] = await execute<{ generic: number; custom: number }>(sql`
      SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
      WHERE statement LIKE ${`${GENERIC_PLAN_HINT.trim()}%`} AND statement LIKE '%by_vector%'`);
    expect(recallStatement).toMatchObject({ custom: 0 });
    expect(recallStatement?.generic).toBeGreaterThanOrEqual(2);
  });
});

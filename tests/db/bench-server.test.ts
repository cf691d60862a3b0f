import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyFrom } from "../../bench/pg-copy";
import { BENCH_DATABASE_PREFIX, createBenchDatabase, refusalOf } from "../../bench/server-database";
import { REPO_ROOT } from "../../dev/start-command";
import { runToExit } from "../helpers/process";
import { dropServerDatabase, newServerDatabase, onServer, testPgUrl } from "../helpers/test-database";

/**
 * `npm run bench -- --database-url` (bench/server-database.ts): the bench on a PostgreSQL server,
 * at a tiny size, as a developer runs it (its own processes), against the server of
 * `npm run test:pg`. Only there: without TEST_PG_URL these are skipped. No timings are asserted.
 */
const server = testPgUrl();
const dir = mkdtempSync(join(tmpdir(), "memsvc-bench-server-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runBench(args: string[]): Promise<{ code: number | null; output: string }> {
  return runToExit(process.execPath, ["--import", "tsx", "bench/run.ts", ...args], {
    cwd: REPO_ROOT,
    env: { BENCH_PG_RESTART: "" },
  });
}

const benchDatabases = () =>
  onServer(async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY 1",
      [BENCH_DATABASE_PREFIX],
    );
    return rows.map((r) => r.datname);
  });

describe.skipIf(!server)("the bench on a PostgreSQL server", () => {
  // The bench's "maintenance" database: an empty one of its own (the server's `postgres` database
  // may hold other suites' tables, which the bench rightly refuses).
  let maintenance: { name: string; url: string };
  beforeAll(async () => {
    maintenance = await newServerDatabase({ empty: true });
  });
  afterAll(async () => {
    if (maintenance) await dropServerDatabase(maintenance.name);
  });

  it("runs recall, tenants, load and hnsw on databases of their own, reports sane figures and drops them", async () => {
    const before = await benchDatabases();
    const out = join(dir, "server.json");
    const run = await runBench([
      "--database-url",
      maintenance.url,
      "--only",
      "recall,tenants,load,hnsw",
      "--facts",
      "200",
      "--datasets",
      "4",
      "--ef-search",
      "40,100",
      "--quick",
      "--out",
      out,
    ]);
    expect(run.code, run.output).toBe(0);
    const result = JSON.parse(readFileSync(out, "utf8"));
    expect(result.database).toMatchObject({ kind: "postgres", pgvector: expect.stringMatching(/^\d+\.\d+/) });
    expect(result.failed).toEqual([]);
    const of = (scenario: string) =>
      result.units.find((u: { unit: { scenario: string } }) => u.unit.scenario === scenario);

    const recall = of("recall").result;
    expect(recall).toMatchObject({ liveFacts: 200, dimensions: 256, embeddingCallsPerQuery: 1 });
    expect(recall.statementsPerRecall).toBeGreaterThan(0);
    expect(recall.withQuery.p50Ms).toBeGreaterThan(0);
    expect(recall.recallAt10).toBeGreaterThanOrEqual(0.9);
    expect(recall.closeToIndex.ratio).toBeGreaterThan(0);
    // Without BENCH_PG_RESTART the cold run is on new connections only, and says so.
    expect(recall.cold).toMatchObject({
      clusterRestarted: false,
      osCacheDropped: false,
      newConnections: true,
      calls: 100,
    });
    expect(recall.cold.p50Ms).toBeGreaterThan(0);
    expect(of("recall").rows.join("\n")).toContain("cold: new connections only");

    const tenants = of("tenants").result;
    expect(tenants).toMatchObject({ facts: 200, datasets: 4, factsPerDataset: 50 });
    expect(tenants.lone.recallAt10).toBeGreaterThanOrEqual(0.9);
    expect(tenants.amongMany.recallAt10).toBeGreaterThanOrEqual(0.9);
    expect(tenants.amongMany.factRowsRead).toBeGreaterThan(0);
    expect(Number.isFinite(tenants.ratio)).toBe(true);

    const load = of("load").result;
    expect(load).toMatchObject({ facts: 200, neighbours: 200, buildNotices: [] });
    expect(load.bytesPerFact).toBeGreaterThan(0);
    expect(of("load").rows[0]).toContain("on the PostgreSQL server");

    // The sweep's settings reach every connection of the service (ALTER DATABASE and new connections).
    const hnsw = of("hnsw").result;
    expect(hnsw.settings.map((s: { efSearch: number }) => s.efSearch)).toEqual([40, 100]);
    for (const s of hnsw.settings) expect(s.recallAt10).toBeGreaterThanOrEqual(0.9);

    expect(await benchDatabases()).toEqual(before);
  }, 300_000);

  it("refuses a URL whose database holds tables it did not make, before making anything", async () => {
    const { name, url } = await newServerDatabase();
    try {
      expect(await refusalOf(maintenance.url)).toBeUndefined();
      expect(await refusalOf(url)).toMatch(/holds \d+ tables and was not made by the bench/);
      await expect(createBenchDatabase(url)).rejects.toThrow(/was not made by the bench/);
      const before = await benchDatabases();
      const run = await runBench(["--database-url", url, "--only", "recall", "--facts", "200"]);
      expect(run.code).toBe(2);
      expect(run.output).toContain("was not made by the bench");
      expect(await benchDatabases()).toEqual(before);
    } finally {
      await dropServerDatabase(name);
    }
  }, 60_000);

  it("COPY FROM STDIN through node-postgres: rows go in; a refused row fails the COPY and the session goes on", async () => {
    const { name, url } = await newServerDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("CREATE TABLE copied (id int PRIMARY KEY, name text)");
      const csv = (rows: string[]) => new TextEncoder().encode(rows.join("\n"));
      // Over a megabyte: sent as more than one CopyData message.
      const many = Array.from({ length: 60_000 }, (_, i) => `${i},"name ${i}, with a comma"`);
      await copyFrom(client, "COPY copied (id, name) FROM STDIN WITH (FORMAT csv)", csv(many));
      await expect(
        copyFrom(client, "COPY copied (id, name) FROM STDIN WITH (FORMAT csv)", csv(["1,again"])),
      ).rejects.toThrow(/duplicate key/);
      const { rows } = await client.query<{ n: number; last: string }>(
        "SELECT count(*)::int AS n, max(name) FILTER (WHERE id = 59999) AS last FROM copied",
      );
      expect(rows[0]).toEqual({ n: 60_000, last: "name 59999, with a comma" });
    } finally {
      await client.end();
      await dropServerDatabase(name);
    }
  });
});

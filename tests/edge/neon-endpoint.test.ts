import { neon as neonClient } from "@neondatabase/serverless";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NeonHttpEndpoint, startNeonHttpEndpoint } from "../../dev/neon-http-endpoint";
import { createNeonDatabase } from "../../lib/db/neon";
import { rowsOf } from "../../lib/db/rows";
import { episodes, messages, projects, threads } from "../../lib/db/schema";
import { compiled, type Database } from "../../lib/db/types";
import { newId } from "../../lib/ids";
import { openTestDatabase, testPgUrl } from "../helpers/test-database";

/**
 * The local SQL-over-HTTP endpoint against the real Neon driver (drizzle-orm/neon-http): values
 * must survive the trip through Postgres text format and the driver's type parsers exactly as the
 * database's own driver sees them (embedded PGlite, or node-postgres on TEST_PG_URL's server),
 * and a batch must be one transaction.
 */
let direct: Database;
let endpoint: NeonHttpEndpoint;
let neon: Database;

beforeAll(async () => {
  direct = await openTestDatabase();
  endpoint = await startNeonHttpEndpoint({ database: direct });
  neon = createNeonDatabase("postgres://user:pass@localhost/db", { fetchEndpoint: endpoint.fetchEndpoint });
});
afterAll(async () => {
  await endpoint?.close();
  await direct?.close();
});

async function newProject() {
  const [project] = await neon.db
    .insert(projects)
    .values({ id: newId("prj"), name: "endpoint" })
    .returning();
  return project;
}

describe("neon-http over the local endpoint", () => {
  it("round-trips text[], jsonb and timestamps, as the database's own driver reads them", async () => {
    const project = await newProject();
    expect(project.createdAt).toBeInstanceOf(Date);
    expect(project.settings).toEqual({});
    const createdAt = new Date("2024-02-29T23:59:59.123Z");
    const row = {
      id: newId("thr"),
      projectId: project.id,
      dataset: "d",
      tags: ["plain", "with,comma", 'with"quote', "with{brace}", "back\\slash", "", "NULL", "ünï ☃"],
      settings: { episodic: { idleMinutes: 5, nested: [1, "two", null, { deep: true }] }, text: 'é\n"q"' },
      lastMessageAt: null,
      createdAt,
    };
    await neon.db.insert(threads).values(row);

    const [viaNeon] = await neon.db.select().from(threads).where(eq(threads.id, row.id));
    const [viaDirect] = await direct.db.select().from(threads).where(eq(threads.id, row.id));
    expect(viaNeon).toEqual(viaDirect);
    expect(viaNeon.tags).toEqual(row.tags);
    expect(viaNeon.settings).toEqual(row.settings);
    expect(viaNeon.createdAt).toEqual(createdAt);
    expect(viaNeon.lastMessageAt).toBeNull();
    expect(viaNeon.lastSeq).toBe(0);
  });

  it("round-trips vectors, booleans, reals, integers and NULLs", async () => {
    const project = await newProject();
    const threadId = newId("thr");
    await neon.db.insert(threads).values({ id: threadId, projectId: project.id, dataset: "d" });
    const message = {
      id: newId("msg"),
      projectId: project.id,
      threadId,
      seq: 1,
      role: "assistant" as const,
      content: "hello",
      tokens: { input: 3, output: 4, total: 7 },
      latencyMs: 12.5,
      isSummary: true,
      summaryFromSeq: null,
      metadata: null,
    };
    await neon.db.insert(messages).values(message);
    const [readMessage] = await neon.db.select().from(messages).where(eq(messages.id, message.id));
    expect(readMessage).toMatchObject(message);
    expect(readMessage).toEqual((await direct.db.select().from(messages).where(eq(messages.id, message.id)))[0]);

    const episode = {
      id: newId("epi"),
      projectId: project.id,
      threadId,
      dataset: "d",
      fromSeq: 1,
      toSeq: 1,
      startedAt: new Date("2025-01-01T00:00:00.000Z"),
      endedAt: new Date("2025-01-01T00:05:00.500Z"),
      keyLearnings: ["a", "b"],
      // Stored at half precision (migration 0013): values it holds and prints exactly.
      embedding: [0.5, -1.25, 3, 0.0078125],
      tokenCount: null,
    };
    await neon.db.insert(episodes).values(episode);
    const [readEpisode] = await neon.db.select().from(episodes).where(eq(episodes.id, episode.id));
    expect(readEpisode).toMatchObject(episode);
    expect(readEpisode).toEqual((await direct.db.select().from(episodes).where(eq(episodes.id, episode.id)))[0]);
  });

  it("answers raw SQL with rows and a row count", async () => {
    const project = await newProject();
    const result = await neon.db.execute(
      sql`UPDATE projects SET name = ${"renamed"} WHERE id = ${project.id} RETURNING name, ${true}::boolean AS flag, ${null}::int AS nothing`,
    );
    expect(rowsOf(result)).toEqual([{ name: "renamed", flag: true, nothing: null }]);
    expect((result as unknown as { rowCount: number }).rowCount).toBe(1);
  });

  it("runs a batch as one transaction: all statements or none", async () => {
    const project = await newProject();
    const ok = newId("thr");
    const results = await neon.batch((db) => [
      db.insert(threads).values({ id: ok, projectId: project.id, dataset: "d" }).returning({ id: threads.id }),
      db.update(threads).set({ lastSeq: 5 }).where(eq(threads.id, ok)).returning({ lastSeq: threads.lastSeq }),
    ]);
    expect(results).toEqual([[{ id: ok }], [{ lastSeq: 5 }]]);

    const doomed = newId("thr");
    const failure = await neon
      .batch((db) => [
        db.insert(threads).values({ id: doomed, projectId: project.id, dataset: "d" }),
        db.update(threads).set({ lastSeq: 6 }).where(eq(threads.id, ok)),
        // Duplicate primary key: the whole batch must roll back.
        db.insert(threads).values({ id: ok, projectId: project.id, dataset: "d" }),
      ])
      .catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as { code?: string }).code).toBe("23505");
    expect(await direct.db.select().from(threads).where(eq(threads.id, doomed))).toEqual([]);
    const [kept] = await direct.db.select().from(threads).where(eq(threads.id, ok));
    expect(kept.lastSeq).toBe(5);
  });

  it("honours the batch isolation headers", async () => {
    const client = neonClient("postgres://user:pass@localhost/db");
    const [[level], [readOnly]] = await client.transaction(
      [client`SHOW transaction_isolation`, client`SHOW transaction_read_only`],
      { isolationLevel: "Serializable", readOnly: true },
    );
    expect([level, readOnly]).toEqual([{ transaction_isolation: "serializable" }, { transaction_read_only: "on" }]);
    const write = await client
      .transaction([client`INSERT INTO projects (id, name) VALUES (${newId("prj")}, 'ro')`], { readOnly: true })
      .catch((err: unknown) => err);
    expect(write).toMatchObject({ code: "25006" });
  });

  it("surfaces Postgres errors with their code and constraint", async () => {
    const failure = await neon.db
      .insert(threads)
      .values({ id: newId("thr"), projectId: "prj_missing", dataset: "d" })
      .catch((err: unknown) => err);
    const cause = (failure as { cause?: Record<string, unknown> }).cause;
    expect(cause).toMatchObject({ code: "23503", constraint: "threads_project_id_projects_id_fk" });
  });

  it("a lead whose carried rows fail its transaction gives them back and goes again bare: the work still answers", async () => {
    const project = await newProject();
    const given: unknown[] = [];
    const accepted: Record<string, unknown>[][] = [];
    // What a key check carrying another request's ledger row for a project just deleted meets.
    const carrying = compiled(sql`WITH carried AS (
      INSERT INTO threads (id, project_id, dataset) VALUES (${newId("thr")}, 'prj_missing', 'd') RETURNING id
    ) SELECT true AS ok FROM (SELECT count(*) FROM carried) c`);
    const leading = neon.withLeading({
      query: carrying,
      accept: (rows) => void accepted.push(rows),
      carried: { bare: compiled(sql`SELECT true AS ok`), giveBack: (err) => void given.push(err) },
    });
    const result = await leading.db.execute(sql`SELECT name FROM projects WHERE id = ${project.id}`);
    expect(rowsOf(result)).toEqual([{ name: "endpoint" }]);
    await leading.settle();
    expect(accepted).toEqual([[{ ok: true }]]);
    expect(given).toHaveLength(1);
    expect((given[0] as { code?: string }).code).toBe("23503");
  });

  // A server only: PGlite has one connection, so nothing else could ask for the lock meanwhile.
  it.runIf(testPgUrl())(
    "holds a lead's row locks only at its transaction's end, not through the statement it rides with",
    async () => {
      const project = await newProject();
      // What an API key check does to its key's row: stamp it (here the project's row).
      const leading = neon.withLeading({
        query: compiled(sql`UPDATE projects SET name = name WHERE id = ${project.id} RETURNING true AS ok`),
        accept: () => {},
      });
      const reading = Promise.resolve(leading.db.execute(sql`SELECT pg_sleep(1.5) AS slept`));
      // While the read runs, another request takes the row at once (a write's key check).
      await expect
        .poll(async () => {
          const running = await direct.db.execute(
            sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(1.5)%'`,
          );
          return rowsOf<{ n: number }>(running)[0].n;
        })
        .toBe(1);
      const locked = await direct.db
        .execute(sql`SELECT id FROM projects WHERE id = ${project.id} FOR UPDATE NOWAIT`)
        .then(
          () => null,
          (err: unknown) =>
            (err as { cause?: { code?: string }; code?: string }).cause?.code ?? (err as { code?: string }).code,
        );
      expect(locked).toBeNull();
      expect(rowsOf(await reading)).toHaveLength(1);
      await leading.settle();
    },
  );

  it("refuses malformed requests with a 400 and a message", async () => {
    const res = await fetch(endpoint.fetchEndpoint, { method: "POST", body: "not json" });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ message: "Request body is not valid JSON" });
    expect((await fetch(`${endpoint.url}/other`, { method: "POST", body: "{}" })).status).toBe(404);
  });
});

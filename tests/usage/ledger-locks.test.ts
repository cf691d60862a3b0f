import { sql } from "drizzle-orm";
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import type { UsageEvent, UsageOperation } from "../../lib/llm/usage";
import { usageInsertSql } from "../../lib/usage/sql";
import { useServerConnections } from "../helpers/server-connections";
import { testPgUrl } from "../helpers/test-database";

/**
 * The ledger's trigger adds a statement's calls to their days' and months' sums (migration 0040):
 * a write locks those rows until it commits. Two writes of the same calls must lock them in the
 * same order, or each holds a row the other waits for: a deadlock, and PostgreSQL aborts one of
 * the statements, which stores the work the calls were for (an episode's summary, a fact batch).
 * A server only: PGlite has one connection.
 */
describe.runIf(testPgUrl())("ledger writes at once (PostgreSQL server)", () => {
  const CONNECTIONS = 24;
  const { clients, run, waitsForLock } = useServerConnections(CONNECTIONS + 1);
  let first: pg.Client;
  let second: pg.Client;

  beforeAll(async () => {
    // Two backends that share a day's sum row (pid % 4) but not the month's (pid % 16), where the
    // order of the day's rows alone decides: with the same month row, the later write waits there first.
    const pids = await Promise.all(
      clients
        .slice(0, CONNECTIONS)
        .map(async (c) => (await c.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number),
    );
    const pair = pids.flatMap((a, i) =>
      pids.flatMap((b, j) => (j > i && b % 4 === a % 4 && b % 16 !== a % 16 ? [[i, j]] : [])),
    );
    expect(pair.length, `backends ${pids.join(", ")}`).toBeGreaterThan(0);
    [first, second] = [clients[pair[0][0]], clients[pair[0][1]]];
    await run(first, sql`INSERT INTO projects (id, name) VALUES ('prj_locks', 'locks')`);
  });

  const call = (operation: UsageOperation): UsageEvent => ({
    operation,
    kind: "chat",
    model: "m",
    inputTokens: 1,
    outputTokens: 1,
    totalTokens: 2,
    outcome: "ok",
  });
  const write = (client: pg.Client, operations: UsageOperation[]) =>
    run(
      client,
      usageInsertSql(operations.map(call), { projectId: "prj_locks", dataset: "d" }, new Date().toISOString()),
    );

  it("take the sums' rows in one order, so one waits for the other instead of deadlocking", async () => {
    await first.query("BEGIN");
    await write(first, ["chat"]);
    await second.query("BEGIN");
    const secondWaits = await waitsForLock(second);
    // The same two calls the other way round: added in key order, its first waits for `first`.
    const secondWrite = write(second, ["compaction", "chat"]);
    await secondWaits();
    await write(first, ["compaction"]);
    await first.query("COMMIT");
    await secondWrite;
    await second.query("COMMIT");

    const { rows } = await run(
      first,
      sql`SELECT operation, sum(calls)::int AS calls, sum(total_tokens)::int AS tokens FROM usage_days
        WHERE project_id = 'prj_locks' GROUP BY operation ORDER BY operation`,
    );
    expect(rows).toEqual([
      { operation: "chat", calls: 2, tokens: 4 },
      { operation: "compaction", calls: 2, tokens: 4 },
    ]);
  });
});

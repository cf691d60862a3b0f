import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { missedIdleTimersSql, scheduleMissedIdleTimers } from "../../lib/episodic/triggers";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The sweep's sleep-time backstop (every minute on the edge) gives an idle thread whose timer went
 * missing a due one. It looked for them among every thread of every project (a million threads:
 * ~90 ms a sweep on a PostgreSQL server). It reads the threads with messages not yet in an episode
 * now, through a partial index over `threads.episode_due` (migration 0030). A new thread's
 * pull-forward of its siblings reads the same index.
 */
let svc: TestService;
beforeAll(async () => {
  // A database of its own: the plan depends on the threads table's size.
  svc = await createTestService();
});
afterAll(async () => {
  await svc?.close();
});

const HOUR = 3_600_000;

async function request(key: string, path: string, json?: unknown) {
  const res = await svc.app.request(path, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(json ?? {}),
  });
  expect(res.status).toBeLessThan(300);
  return (await res.json()) as Record<string, unknown>;
}

const dueOf = async (threadId: string) =>
  rowsOf<{ episode_due: boolean }>(
    await svc.deps.db.execute(sql`SELECT episode_due FROM threads WHERE id = ${threadId}`),
  )[0]?.episode_due;

describe("threads with messages not yet in an episode", () => {
  // First: the statistics then count this test's updates alone (a server reports them late).
  it("cost an append no index write: only a thread's first new message changes the flag", async () => {
    const { key } = await newTenant(svc, "due-hot");
    const threadId = (await request(key, "/v1/threads", { dataset: "d" })).threadId as string;
    // Updates of the threads table, and those that wrote no index entry (HOT), from the statistics.
    const updates = async () => {
      await svc.deps.db.execute(sql`SELECT pg_stat_force_next_flush()`);
      const [row] = rowsOf<{ all: number; hot: number }>(
        await svc.deps.db.execute(
          sql`SELECT n_tup_upd::int AS all, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relname = 'threads'`,
        ),
      );
      return row;
    };
    const before = await updates();
    for (let i = 0; i < 10; i++) {
      await request(key, `/v1/memory/working/threads/${threadId}/messages`, { role: "user", content: `turn ${i}` });
    }
    // A server's other connections report theirs within a second or so of going idle.
    let after = await updates();
    for (let waited = 0; after.all - before.all < 10 && waited < 5_000; waited += 100) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await updates();
    }
    expect(after.all - before.all).toBe(10);
    expect(after.hot - before.hot).toBe(9);
  });

  it("are flagged by Postgres as messages come and episodes are cut", async () => {
    const { key } = await newTenant(svc, "due-flag");
    const threadId = (await request(key, "/v1/threads", { dataset: "d" })).threadId as string;
    expect(await dueOf(threadId)).toBe(false);
    await request(key, `/v1/memory/working/threads/${threadId}/messages`, { role: "user", content: "I like tea" });
    expect(await dueOf(threadId)).toBe(true);
    await request(key, `/v1/threads/${threadId}/end`);
    expect(await dueOf(threadId)).toBe(false);
    await request(key, `/v1/memory/working/threads/${threadId}/messages:batch`, {
      messages: [{ role: "user", content: "and coffee" }],
    });
    expect(await dueOf(threadId)).toBe(true);
  });

  it("are all the sweep's backstop reads, however many threads are done with", async () => {
    const { projectId } = await newTenant(svc, "backstop-scale");
    const now = svc.deps.clock.now().getTime();
    const at = (ms: number) => new Date(now - ms).toISOString();
    // 3,000 threads whose messages are all in episodes; two idle for a day with messages not yet
    // in one and no timer (the backstop's to arm), and one written to a minute ago (not idle yet).
    await svc.deps.db.execute(sql`
      INSERT INTO threads (id, project_id, dataset, last_seq, episode_seq, last_message_at, created_at, updated_at)
      SELECT 'thr_scale_' || g, ${projectId}, 'd', 4, CASE WHEN g <= 3 THEN 2 ELSE 4 END,
        CASE WHEN g = 3 THEN ${at(60_000)}::timestamptz ELSE ${at(24 * HOUR)}::timestamptz END,
        ${at(48 * HOUR)}::timestamptz, ${at(24 * HOUR)}::timestamptz
      FROM generate_series(1, 3003) g`);
    // Statistics as autovacuum would have them for a table this size.
    await svc.deps.db.execute(sql`ANALYZE threads`);

    // EXPLAIN ANALYZE runs the statement: the timers are armed by it.
    const plan = planOf(
      await svc.deps.db.execute(
        sql`EXPLAIN (ANALYZE, FORMAT JSON) ${missedIdleTimersSql(new Date(now).toISOString(), 500)}`,
      ),
    );
    const read = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "threads");
    expect(read.map((n) => n["Index Name"])).toEqual(["threads_episode_due_idx"]);
    // The table's due threads (these three, and any an earlier test left), none of the 3,000.
    expect(read[0]["Actual Rows"]).toBeGreaterThanOrEqual(3);
    expect(read[0]["Actual Rows"]).toBeLessThan(10);

    const timers = rowsOf<{ key: string }>(
      await svc.deps.db.execute(
        sql`SELECT key FROM jobs WHERE kind = 'thread-idle' AND project_id = ${projectId} ORDER BY key`,
      ),
    );
    expect(timers.map((t) => t.key)).toEqual(["idle:thr_scale_1", "idle:thr_scale_2"]);
    expect(await scheduleMissedIdleTimers(svc.deps, 500)).toBe(0);
  });
});

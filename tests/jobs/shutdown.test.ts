import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { JOB_CONCURRENCY } from "../../lib/jobs/runner";
import type { Logger } from "../../lib/log";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { createTestService, newTenant } from "../helpers/service";

/**
 * Shutting the Node.js host down (what SIGTERM does after the HTTP server): the jobs its timers
 * started finish before the database closes under them, and the jobs still waiting for a slot
 * never start (they stay due for the next start). Before, close() closed the database at once:
 * every running job failed on it, and the waiting ones started only to fail.
 */
const provider = await startFakeOpenAI();
afterAll(() => provider.close());
provider.onStructured("episode_summary", () => ({ summary: "a summary", keyLearnings: [] }));
provider.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));

describe("closing the Node.js host", () => {
  it("lets running jobs finish, starts none of those waiting for a slot, and logs no failure", async () => {
    const problems: string[] = [];
    const note = (level: string) => (message: string) => problems.push(`${level}: ${message}`);
    const log: Logger = { error: note("error"), warn: note("warn"), info: () => {}, debug: () => {} };
    const svc = await createTestService({ provider, doorbell: "timers", log, shutdownGraceMs: 20_000 });
    const { key } = await newTenant(svc, "shutdown");
    const call = async (path: string, json: unknown) =>
      (await (await svc.request(path, { method: "POST", token: key, json })).json()) as Record<string, string>;
    provider.endpointLatencyMs.chat = 1_000;
    const ENDED = JOB_CONCURRENCY + 6;
    for (let i = 0; i < ENDED; i++) {
      const { threadId } = await call("/v1/threads", { dataset: "ds" });
      await call(`/v1/memory/working/threads/${threadId}/messages`, { role: "user", content: `thread ${i}` });
      await call(`/v1/threads/${threadId}/end`, {});
    }
    // Every slot holds a job waiting on its summary; the rest wait for a slot.
    await expect.poll(() => provider.inFlight, { timeout: 10_000, interval: 20 }).toBe(JOB_CONCURRENCY);

    // The episodes as the database holds them when the host closes it.
    const database = svc.deps.database;
    const closeDatabase = database.close.bind(database);
    let atClose: Record<string, number> = {};
    database.close = async () => {
      const rows = rowsOf<{ status: string; n: number }>(
        await database.db.execute(sql`SELECT status, count(*)::int AS n FROM episodes GROUP BY status`),
      );
      atClose = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
      await closeDatabase();
    };
    await svc.close();

    expect(atClose).toEqual({ completed: JOB_CONCURRENCY, pending: ENDED - JOB_CONCURRENCY });
    expect(provider.chatCalls("episode_summary")).toHaveLength(JOB_CONCURRENCY);
    expect(problems).toEqual([]);
  });
});

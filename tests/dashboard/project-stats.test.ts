import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { runDueJobs } from "../../lib/jobs/runner";
import { useEpisodicService } from "../helpers/episodic-fixtures";
import { adminSession } from "../helpers/service";

const { h, tenant } = useEpisodicService();

describe("GET /dashboard/projects/:id/stats", () => {
  it("counts messages, episodes by status, extraction failures the API hides, facts and entities", async () => {
    const t = await tenant("stats");
    const session = await adminSession(h.svc);
    const ok = await t.thread("ds");
    await t.conversation(ok, ["I live in Lisbon", "Nice city"]);
    await t.end(ok);
    await runDueJobs(h.svc.deps); // summary and (empty) extraction: completed
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    h.fake.onStructured("episode_summary", () => ({ summary: "s", keyLearnings: [] }));
    const failing = await t.thread("ds");
    await t.conversation(failing, ["I like tea"]);
    await t.end(failing);
    await runDueJobs(h.svc.deps); // the summary call fails: episode failed

    const res = await h.svc.request(`/dashboard/projects/${t.projectId}/stats`, { token: session });
    expect(res.status).toBe(200);
    const { stats } = (await res.json()) as { stats: Record<string, unknown> };
    expect(stats).toEqual({
      threads: 2,
      messages: 3,
      episodes: { pending: 0, processing: 0, completed: 1, failed: 1, archived: 0 },
      extraction: { pending: 0, processing: 0, completed: 1, failed: 0, skipped: 0 },
      facts: { live: 0, superseded: 0 },
      entities: 0,
    });
  });

  it("does not count compaction summaries as messages", async () => {
    const t = await tenant("stats-compaction");
    const session = await adminSession(h.svc);
    const th = await t.thread("ds");
    await t.conversation(
      th,
      Array.from({ length: 10 }, (_, i) => `message ${i}`),
    );
    const compacted = await t.get(`/v1/memory/working/threads/${th}/compact`, { method: "POST" });
    expect(await compacted.json()).toMatchObject({ compactedCount: 4 });
    const res = await h.svc.request(`/dashboard/projects/${t.projectId}/stats`, { token: session });
    expect(((await res.json()) as { stats: { messages: number } }).stats.messages).toBe(10);
  });

  it("shows a fact extraction failure that every /v1 answer hides", async () => {
    const t = await tenant("stats-extraction");
    const session = await adminSession(h.svc);
    h.fake.onStructured("fact_extraction", () => ({ wrong: true }));
    const th = await t.thread("ds");
    await t.conversation(th, ["I live in Lisbon"]);
    await t.end(th);
    await runDueJobs(h.svc.deps);
    const res = await h.svc.request(`/dashboard/projects/${t.projectId}/stats`, { token: session });
    const { stats } = (await res.json()) as {
      stats: { episodes: Record<string, number>; extraction: Record<string, number> };
    };
    expect(stats.episodes.completed).toBe(1);
    expect(stats.extraction.failed).toBe(1);
  });

  it("counts a fact forgotten through /v1 as neither live nor superseded", async () => {
    const t = await tenant("stats-forgotten");
    const session = await adminSession(h.svc);
    const insert = (id: string, object: string, invalidAt: string | null) =>
      h.svc.deps.db.execute(sql`
        INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote,
                           valid_at, valid_until, invalid_at)
        VALUES (${id}, ${t.projectId}, 'ds', 'user', 'lives_in', ${object}, 0.9, ${`I live in ${object}`},
                now() - interval '1 day', ${invalidAt}::timestamptz, ${invalidAt}::timestamptz)`);
    await insert("fct_stats_live", "Lisbon", null);
    // Replaced by the one above: superseded (invalid_at set, forgotten_at not).
    await insert("fct_stats_superseded", "Porto", new Date(Date.now() - 3_600_000).toISOString());
    await insert("fct_stats_forgotten", "Faro", null);
    const forgotten = await t.get("/v1/memory/semantic/datasets/ds/facts/fct_stats_forgotten", { method: "DELETE" });
    expect(forgotten.status, await forgotten.text()).toBe(200);

    const res = await h.svc.request(`/dashboard/projects/${t.projectId}/stats`, { token: session });
    expect(res.status).toBe(200);
    const { stats } = (await res.json()) as { stats: { facts: Record<string, number> } };
    expect(stats.facts).toEqual({ live: 1, superseded: 1 });
  });

  it("404 for an unknown project, 401 without a session", async () => {
    const session = await adminSession(h.svc);
    const res = await h.svc.request("/dashboard/projects/prj_unknown/stats", { token: session });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "Project not found" });
    expect((await h.svc.request("/dashboard/projects/prj_unknown/stats")).status).toBe(401);
  });
});

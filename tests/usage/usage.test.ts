import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { runDueJobs, sweep } from "../../lib/jobs/runner";
import { patchProjectSettings } from "../../lib/settings/store";
import { budgetSpentSql } from "../../lib/usage/budget";
import { usageCollector } from "../../lib/usage/collector";
import { sumTotals, USAGE_GROUPINGS, type UsageTotals, usageGroupsSql } from "../../lib/usage/ledger";
import { deferUsage } from "../../lib/usage/sql";
import { createWebhookEndpoint } from "../../lib/webhooks/endpoints";
import { type Tenant, useEpisodicService } from "../helpers/episodic-fixtures";
import type { ReportedUsage } from "../helpers/fake-openai";
import { embedWaitingMessages } from "../helpers/jobs-of-kind";
import { planNodes, planOf } from "../helpers/plan";
import { fact, judge } from "../helpers/semantic-fixtures";

/**
 * The usage ledger (lib/usage) against the fake provider's own log: every call it answered is a
 * row, with the tokens it reported; and the monthly budget, which pauses extraction without
 * losing a message and resumes it by itself.
 */
/** Statements sent while `recording` (a request being measured). */
const statements: string[] = [];
let recording = false;
const { h, tenant, json } = useEpisodicService({
  env: { WEBHOOKS_ALLOW_HTTP: "true" },
  onQuery: (statement) => {
    if (recording) statements.push(statement);
  },
});

/** The statements one request sends (deferred work included), and its status. */
async function measured(send: () => Response | Promise<Response>) {
  statements.length = 0;
  recording = true;
  try {
    const res = await send();
    await res.arrayBuffer();
    await h.svc.settle();
    return { status: res.status, statements: [...statements] };
  } finally {
    recording = false;
  }
}

interface LedgerRow {
  operation: string;
  kind: string;
  model: string;
  dataset: string | null;
  input_tokens: number | null;
  output_tokens: number | null;
  total_tokens: number | null;
  outcome: string;
}

async function ledger(t: Tenant): Promise<LedgerRow[]> {
  return rowsOf<LedgerRow>(
    await h.svc.deps.db.execute(sql`
      SELECT operation, kind, model, dataset, input_tokens, output_tokens, total_tokens, outcome
      FROM usage_events WHERE project_id = ${t.projectId} ORDER BY id`),
  );
}

const sum = (values: (number | null | undefined)[]) => values.reduce<number>((n, v) => n + (v ?? 0), 0);

/** The fake's log as the ledger should hold it: one row per request, by endpoint, with its usage. */
function providerLog() {
  return h.fake.requests.map((r) => ({ kind: r.endpoint === "chat" ? "chat" : "embedding", usage: r.usage }));
}

function byKind(rows: { kind: string }[]) {
  const out: Record<string, number> = {};
  for (const r of rows) out[r.kind] = (out[r.kind] ?? 0) + 1;
  return out;
}

async function usage(t: Tenant, query = "") {
  return json<{
    groups: { key: string | null; calls: number; totalTokens: number; unknownCalls: number; failedCalls: number }[];
    total: {
      calls: number;
      inputTokens: number;
      outputTokens: number;
      totalTokens: number;
      unknownCalls: number;
      failedCalls: number;
    };
    budget: { monthlyTokenBudget: number | null; spent: number; exhausted: boolean };
  }>(await t.get(`/v1/usage${query}`), 200);
}

/** Every model call of the service's work for one tenant: episodes, extraction, judge, recall, chat, compaction, search. */
async function spendEverywhere(t: Tenant) {
  await patchProjectSettings(
    { deps: h.svc.deps, projectId: t.projectId },
    // Every live fact is a contradiction candidate: the judge is called for the second episode.
    { semantic: { contradictionBandMin: 0 } },
  );
  h.fake.onStructured("fact_extraction", (request) => {
    const text = request.messages.at(-1)?.content ?? "";
    return text.includes("Paris")
      ? { facts: [fact("lives_in", "Paris", "I live in Paris")], entities: [{ name: "Paris", type: "PLACE" }] }
      : { facts: [fact("lives_in", "Lisbon", "I now live in Lisbon")], entities: [] };
  });
  h.fake.onStructured(
    "contradiction_judgement",
    judge(() => true),
  );

  const first = await t.thread("ledger");
  await t.conversation(first, ["I live in Paris", "Noted."]);
  await t.end(first);
  await runDueJobs(h.svc.deps);
  const second = await t.thread("ledger");
  // Long enough for compaction to fold some (it keeps the 6 newest).
  await t.conversation(second, ["I now live in Lisbon", "Nice.", "It is sunny", "Lucky you.", "Yes", "Indeed."]);
  await t.end(second);
  await runDueJobs(h.svc.deps);

  const recall = await t.get("/v1/memory/recall", {
    method: "POST",
    json: { dataset: "ledger", query: "where does the user live", include: ["synthesis"] },
  });
  expect((await json<{ synthesis: string | null }>(recall, 200)).synthesis).not.toBeNull();
  const chat = await t.get(`/v1/memory/working/threads/${second}/chat`, {
    method: "POST",
    json: { content: "Where do I live?", recall: true },
  });
  await json(chat, 200);
  const search = await t.get("/v1/memory/episodic/datasets/ledger/episodes/search?q=Lisbon");
  await json(search, 200);
  const compact = await t.get(`/v1/memory/working/threads/${second}/compact`, { method: "POST" });
  await json(compact, 200);
  // Synthesis is recorded after the response (deps.defer): wait for it.
  await h.svc.settle();
}

describe("the usage ledger", () => {
  it("records every provider call with the tokens the provider reported: the fake's log and the ledger agree", async () => {
    const t = await tenant("ledger");
    await spendEverywhere(t);

    const rows = await ledger(t);
    const log = providerLog();
    expect(log.length).toBeGreaterThan(8);
    // Call for call: as many rows as requests, of the same kinds, with the same tokens.
    expect(rows).toHaveLength(log.length);
    expect(byKind(rows)).toEqual(byKind(log));
    const reported = (k: keyof ReportedUsage) => sum(log.map((l) => l.usage?.[k]));
    expect(sum(rows.map((r) => r.total_tokens))).toBe(reported("total_tokens"));
    expect(sum(rows.map((r) => r.input_tokens))).toBe(reported("prompt_tokens"));
    expect(sum(rows.map((r) => r.output_tokens))).toBe(reported("completion_tokens"));
    expect(rows.every((r) => r.outcome === "ok" && r.total_tokens !== null && r.dataset === "ledger")).toBe(true);
    // Each operation the service spends tokens on is there, under its name.
    expect(new Set(rows.map((r) => r.operation))).toEqual(
      new Set([
        "message_embedding",
        "episode_summary",
        "episode_embedding",
        "fact_extraction",
        "extraction_embedding",
        "contradiction_judge",
        "recall_embedding",
        "recall_synthesis",
        "chat",
        "episode_search_embedding",
        "compaction",
      ]),
    );
    expect(rows.find((r) => r.operation === "chat")?.model).toBe("gpt-4o-mini");

    // The API sums the same rows, by operation and in total.
    const report = await usage(t, "?groupBy=operation");
    expect(report.total).toMatchObject({
      calls: log.length,
      totalTokens: reported("total_tokens"),
      inputTokens: reported("prompt_tokens"),
      outputTokens: reported("completion_tokens"),
      unknownCalls: 0,
      failedCalls: 0,
    });
    const chat = report.groups.find((g) => g.key === "chat");
    expect(chat?.calls).toBe(1);
    expect(chat?.totalTokens).toBe(rows.find((r) => r.operation === "chat")?.total_tokens);
    const days = await usage(t, "?groupBy=day");
    expect(days.groups.map((g) => g.key)).toEqual([h.clock.now().toISOString().slice(0, 10)]);
    expect(days.budget).toMatchObject({ monthlyTokenBudget: null, spent: reported("total_tokens"), exhausted: false });
    // Another project's key sees none of it.
    const other = await tenant("other");
    expect((await usage(other)).total.calls).toBe(0);
  });

  it("costs no statement of its own: chat, recall with a query and episode search send what they sent before", async () => {
    const t = await tenant("statements");
    const threadId = await t.thread("d");
    await t.say(threadId, "I live in Lisbon");
    const post = (path: string, body?: unknown) => () =>
      t.get(path, { method: "POST", ...(body ? { json: body } : {}) });
    // Authentication, the user's message, the window (and the budget), recall (and its query
    // embedding's row), the reply (and the chat call's row).
    // (A question of its own: a query embedding cached by an earlier test would make no call.)
    const chat = await measured(
      post(`/v1/memory/working/threads/${threadId}/chat`, { content: "Which city is home for me these days?" }),
    );
    expect(chat.status).toBe(200);
    expect(chat.statements).toHaveLength(5);
    expect(chat.statements.filter((s) => s.includes('INSERT INTO "usage_events"'))).toHaveLength(2);
    // A read: the key's check and the recall statement, which records the query embedding.
    const recall = await measured(post("/v1/memory/recall", { dataset: "d", query: "a question never asked before" }));
    expect(recall.status).toBe(200);
    expect(recall.statements).toHaveLength(2);
    expect(recall.statements[1]).toMatch(/INSERT INTO "usage_events"/);
    const search = await measured(() => t.get("/v1/memory/episodic/datasets/d/episodes/search?q=Lisbon%20trips"));
    expect(search.status).toBe(200);
    expect(search.statements).toHaveLength(2);
    expect(search.statements[1]).toMatch(/^WITH usage_recorded AS/);
    expect((await ledger(t)).map((r) => r.operation)).toEqual([
      "recall_embedding",
      "chat",
      "recall_embedding",
      "episode_search_embedding",
    ]);
  });

  it("counts a provider that reports no usage as unknown, not zero", async () => {
    const t = await tenant("unknown");
    h.fake.usage = "none";
    const res = await t.get("/v1/memory/recall", { method: "POST", json: { dataset: "d", query: "anything at all" } });
    await json(res, 200);
    const rows = await ledger(t);
    expect(rows).toEqual([
      expect.objectContaining({ operation: "recall_embedding", total_tokens: null, outcome: "ok" }),
    ]);
    expect((await usage(t)).total).toMatchObject({ calls: 1, totalTokens: 0, unknownCalls: 1 });
  });

  it("records a failed call (no reply to store it with) with its outcome", async () => {
    const t = await tenant("failed");
    const threadId = await t.thread("d");
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const res = await t.get(`/v1/memory/working/threads/${threadId}/chat`, {
      method: "POST",
      json: { content: "hello", recall: false },
    });
    expect(res.status).toBe(500);
    // Not on the failed request's path: the next request's key check writes it.
    expect(await ledger(t)).toEqual([]);
    const next = await measured(() => t.get("/v1/usage"));
    const carrying = next.statements.filter((s) => s.startsWith("WITH usage_carried AS"));
    expect(carrying).toEqual([expect.stringMatching(/INSERT INTO "usage_events"[\s\S]*UPDATE "api_keys"/)]);
    // The carry, and the report (of whole days: from their sums).
    expect(next.statements.filter((s) => /"usage_(events|days)"/.test(s))).toHaveLength(2);
    expect(await ledger(t)).toEqual([
      expect.objectContaining({ operation: "chat", kind: "chat", dataset: "d", total_tokens: null, outcome: "error" }),
    ]);
    expect((await usage(t)).total).toMatchObject({ calls: 1, failedCalls: 1, unknownCalls: 1 });
  });

  /** A chat call waiting in the backlog for a request to carry it. */
  const call = { operation: "chat", kind: "chat", model: "m", outputTokens: 1, totalTokens: 4, outcome: "ok" } as const;

  it("rides in a write's key check too; a row that cannot be written never fails the request carrying it", async () => {
    const t = await tenant("carried-write");
    await h.svc.settle(); // no earlier test's row left waiting
    const backlog = h.svc.deps.usageBacklog;
    const scope = { projectId: t.projectId, dataset: "d" };
    // More tokens than the ledger's integer column holds (the client never records such a count).
    backlog.add([{ ...call, inputTokens: 2 ** 40 }], scope, h.clock.now().toISOString());
    const first = await t.get("/v1/threads", { method: "POST", json: { dataset: "d" } });
    expect(first.status).toBe(201);
    expect(backlog.take()).toEqual([expect.objectContaining({ inputTokens: 2 ** 40, attempts: 1 })]);

    backlog.add([{ ...call, inputTokens: 3 }], scope, h.clock.now().toISOString());
    const second = await measured(() => t.get("/v1/threads", { method: "POST", json: { dataset: "d" } }));
    expect(second.status).toBe(201);
    expect(second.statements[0]).toMatch(/^WITH usage_carried AS \(INSERT INTO "usage_events"[\s\S]*UPDATE "api_keys"/);
    expect(backlog.pending).toBe(0);
    expect(await ledger(t)).toEqual([expect.objectContaining({ operation: "chat", input_tokens: 3, dataset: "d" })]);
  });

  it("rides in a read's key check; a row that cannot be written never fails the read carrying it", async () => {
    const t = await tenant("carried-read");
    await h.svc.settle();
    const backlog = h.svc.deps.usageBacklog;
    backlog.add(
      [{ ...call, inputTokens: 2 ** 40 }],
      { projectId: t.projectId, dataset: "d" },
      h.clock.now().toISOString(),
    );
    const read = await measured(() => t.get("/v1/usage"));
    expect(read.status).toBe(200);
    // The key check went again without the row, which waited for its own statement (and failed it too).
    expect(read.statements.filter((s) => /UPDATE "api_keys"/.test(s))).toHaveLength(2);
    expect(backlog.pending).toBe(0);
    expect(await ledger(t)).toEqual([]);
    // An unknown key is still refused.
    backlog.add(
      [{ ...call, inputTokens: 2 ** 40 }],
      { projectId: t.projectId, dataset: "d" },
      h.clock.now().toISOString(),
    );
    const refused = await t.get("/v1/usage", { token: "nope" });
    expect(refused.status).toBe(401);
    await h.svc.settle();
  });

  it("writes again rows whose write failed, without another request; a shutdown writes what still waits", async () => {
    const t = await tenant("failed-write");
    await h.svc.settle();
    const db = h.svc.deps.db;
    // A real failure, once per reset of the sequence (which a rolled-back statement does not undo).
    await db.execute(sql`CREATE SEQUENCE test_ledger_writes`);
    await db.execute(sql`CREATE FUNCTION test_fail_first_ledger_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.dataset = 'fails-once' AND nextval('test_ledger_writes') = 1 THEN RAISE EXCEPTION 'ledger write failed'; END IF;
        RETURN NEW;
      END $$`);
    await db.execute(sql`CREATE TRIGGER test_fail_first_ledger_write BEFORE INSERT ON usage_events
      FOR EACH ROW EXECUTE FUNCTION test_fail_first_ledger_write()`);
    const owner = { projectId: t.projectId, dataset: "fails-once" };
    const leftOver = () => {
      const usage = usageCollector();
      usage.meter("recall_synthesis")({
        kind: "chat",
        model: "m",
        inputTokens: 3,
        outputTokens: 1,
        totalTokens: 4,
        outcome: "ok",
      });
      return usage;
    };
    try {
      // On the Worker (no settle): what `waitUntil` was given is all there is.
      const waitedFor: Promise<unknown>[] = [];
      const worker = { ...h.svc.deps, defer: (work: Promise<unknown>) => void waitedFor.push(work) };
      deferUsage(worker, leftOver(), owner);
      h.svc.deps.usageBacklog.hurry();
      await waitedFor[0];
      expect(h.svc.deps.usageBacklog.pending).toBe(1);
      expect(waitedFor).toHaveLength(2); // the write again, in the same invocation's waitUntil
      h.svc.deps.usageBacklog.hurry();
      await waitedFor[1];
      expect(h.svc.deps.usageBacklog.pending).toBe(0);
      expect(await ledger(t)).toHaveLength(1);

      // On Node.js, the shutdown's settle: the failed write's rows are written before the database closes.
      await db.execute(sql`SELECT setval('test_ledger_writes', 1, false)`);
      deferUsage(h.svc.deps, leftOver(), owner);
      await h.svc.settle();
      expect(h.svc.deps.usageBacklog.pending).toBe(0);
      expect(await ledger(t)).toHaveLength(2);
    } finally {
      await db.execute(sql`DROP TRIGGER test_fail_first_ledger_write ON usage_events`);
      await db.execute(sql`DROP FUNCTION test_fail_first_ledger_write()`);
      await db.execute(sql`DROP SEQUENCE test_ledger_writes`);
    }
  });

  it("keeps the calls of a result whose write failed: an episode's summary, a compaction", async () => {
    const t = await tenant("write-fails");
    const db = h.svc.deps.db;
    // The episode's completion and the compaction's summary message fail to write, once each.
    await db.execute(sql`CREATE FUNCTION test_fail_result_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF to_jsonb(NEW) ->> 'status' = 'completed' AND to_jsonb(NEW) ->> 'dataset' = 'write-fails'
          OR (to_jsonb(NEW) ->> 'is_summary')::boolean THEN
          RAISE EXCEPTION 'transient failure';
        END IF;
        RETURN NEW;
      END $$`);
    await db.execute(
      sql`CREATE TRIGGER test_fail_result_write BEFORE UPDATE ON episodes FOR EACH ROW EXECUTE FUNCTION test_fail_result_write()`,
    );
    await db.execute(
      sql`CREATE TRIGGER test_fail_result_write BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION test_fail_result_write()`,
    );
    try {
      const threadId = await t.thread("write-fails");
      await t.conversation(
        threadId,
        Array.from({ length: 12 }, (_, i) => `message number ${i}`),
      );
      const { episodeId } = await t.end(threadId);
      await runDueJobs(h.svc.deps);
      expect(await t.episode(episodeId as string)).toMatchObject({ status: "failed" });
      const compact = await t.get(`/v1/memory/working/threads/${threadId}/compact`, { method: "POST" });
      expect(compact.status).toBe(500);
      await compact.arrayBuffer();
      h.svc.deps.usageBacklog.hurry();
      await h.svc.settle();
      const operations = (await ledger(t)).map((r) => r.operation);
      expect(operations.filter((o) => o === "episode_summary")).toHaveLength(1);
      expect(operations.filter((o) => o === "episode_embedding")).toHaveLength(1);
      expect(operations.filter((o) => o === "compaction")).toHaveLength(1);
    } finally {
      await db.execute(sql`DROP TRIGGER test_fail_result_write ON episodes`);
      await db.execute(sql`DROP TRIGGER test_fail_result_write ON messages`);
      await db.execute(sql`DROP FUNCTION test_fail_result_write()`);
    }
  });

  it("refuses a range that ends before it starts (400 naming the parameter)", async () => {
    const t = await tenant("range");
    const res = await t.get("/v1/usage?start=2020-02-01&end=2020-01-01");
    const body = await json<{ error: string; issues: { path: string[] }[] }>(res, 400);
    expect(body.error).toBe("Validation error");
    expect(body.issues[0].path).toEqual(["start"]);
  });
});

describe("usage reads", () => {
  type Call = LedgerRow & { created_at: string };
  const GROUPINGS = USAGE_GROUPINGS;

  /** The report the ledger's own rows give for a range, computed here call by call. */
  function expected(calls: Call[], range: { start: string; end: string }, by: (typeof GROUPINGS)[number]) {
    const groups = new Map<string | null, UsageTotals>();
    for (const c of calls) {
      const at = new Date(c.created_at).getTime();
      if (at < Date.parse(range.start) || at >= Date.parse(range.end)) continue;
      const key = by === "day" ? new Date(at).toISOString().slice(0, 10) : c[by];
      const g = groups.get(key) ?? sumTotals([]);
      g.calls++;
      g.inputTokens += c.input_tokens ?? 0;
      g.outputTokens += c.output_tokens ?? 0;
      g.totalTokens += c.total_tokens ?? 0;
      if (c.total_tokens === null) g.unknownCalls++;
      if (c.outcome !== "ok") g.failedCalls++;
      groups.set(key, g);
    }
    return [...groups].map(([key, totals]) => ({ key, ...totals }));
  }

  const byKey = (groups: { key: string | null }[]) =>
    [...groups].sort((a, b) => String(a.key).localeCompare(String(b.key)));

  it("sum whole days from their daily totals and the partial days at the ends from the calls: what the calls sum to", async () => {
    const t = await tenant("days");
    const write = (
      at: string,
      count: number,
      dataset: string | null,
      operation: string,
      tokens: string,
      outcome = "ok",
    ) =>
      h.svc.deps.db.execute(sql`
        INSERT INTO usage_events (project_id, dataset, operation, kind, model, input_tokens, output_tokens, total_tokens, outcome, created_at)
        SELECT ${t.projectId}, ${dataset}, ${operation}, 'chat', ${operation === "chat" ? "gpt" : "emb"},
          ${sql.raw(tokens)}, ${sql.raw(tokens)} / 2, ${sql.raw(tokens)} + ${sql.raw(tokens)} / 2, ${outcome},
          ${at}::timestamptz + g * interval '1 ms'
        FROM generate_series(0, ${count - 1}) g`);
    await write("2026-05-01T00:00:00Z", 5, "a", "chat", "g % 3");
    await write("2026-05-01T23:59:59.990Z", 3, null, "recall_embedding", "NULL");
    await write("2026-05-02T12:00:00Z", 4, "b", "chat", "10 + g", "error");
    for (let i = 0; i < 3; i++) await write("2026-05-02T13:00:00Z", 1000, "a", "recall_embedding", "g % 7");
    await write("2026-05-03T06:00:00Z", 7, "a", "chat", "100");
    await write("2026-05-04T00:00:00Z", 2, "b", "recall_embedding", "1");
    await write("2026-04-30T23:59:59.999Z", 1, "a", "chat", "1000");

    const ranges = [
      { start: "2026-05-01T00:00:00.000Z", end: "2026-05-05T00:00:00.000Z" }, // whole days
      { start: "2026-05-01T12:00:00.000Z", end: "2026-05-03T07:00:00.000Z" }, // a partial day at each end
      { start: "2026-05-02T00:00:00.000Z", end: "2026-05-02T12:00:00.003Z" }, // within one day
      { start: "2026-04-30T23:00:00.000Z", end: "2026-05-04T00:00:00.001Z" }, // a call at each edge
    ];
    const check = async () => {
      const calls = rowsOf<Call>(
        await h.svc.deps.db.execute(sql`SELECT dataset, operation, kind, model, input_tokens, output_tokens, total_tokens, outcome,
          to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at
          FROM usage_events WHERE project_id = ${t.projectId}`),
      );
      for (const range of ranges) {
        for (const by of GROUPINGS) {
          const report = await usage(t, `?start=${range.start}&end=${range.end}&groupBy=${by}`);
          expect(byKey(report.groups), `${by} over ${range.start}..${range.end}`).toEqual(
            byKey(expected(calls, range, by)),
          );
        }
      }
    };
    await check();
    expect(
      (await usage(t, `?start=${ranges[0].start}&end=${ranges[0].end}&groupBy=dataset`)).groups.map((g) => g.key),
    ).toEqual(["a", "b", null]);

    // A whole month reads the daily totals alone: a row per key and day, however many calls.
    const plan = planOf(
      await h.svc.deps.db.execute(
        sql`EXPLAIN (ANALYZE, FORMAT JSON) ${usageGroupsSql(t.projectId, { start: new Date("2026-05-01T00:00:00Z"), end: new Date("2026-06-01T00:00:00Z") }, [...GROUPINGS], h.clock.now())}`,
      ),
    );
    const read = planNodes(plan.Plan).filter((n) => n["Relation Name"]?.startsWith("usage_"));
    expect(read.map((n) => n["Relation Name"]).filter((name) => name !== "usage_month_tokens")).toEqual(["usage_days"]);
    expect(read.find((n) => n["Relation Name"] === "usage_days")?.["Actual Rows"]).toBeLessThanOrEqual(7);

    // An operator who prunes calls: the reads follow what the ledger holds, and a group left with none is gone.
    await h.svc.deps.db.execute(sql`DELETE FROM usage_events WHERE project_id = ${t.projectId} AND dataset = 'b'`);
    await h.svc.deps.db.execute(
      sql`DELETE FROM usage_events WHERE project_id = ${t.projectId} AND total_tokens = 9 AND created_at >= '2026-05-02T00:00:00Z'`,
    );
    await check();
    expect(
      (await usage(t, `?start=${ranges[0].start}&end=${ranges[0].end}&groupBy=dataset`)).groups.map((g) => g.key),
    ).toEqual(["a", null]);
  });
});

describe("the monthly token budget", () => {
  /** Spends tokens (one chat turn), then sets the budget below what was spent. */
  async function spentTenant(name: string) {
    const t = await tenant(name);
    const threadId = await t.thread("budget");
    await json(
      await t.get(`/v1/memory/working/threads/${threadId}/chat`, {
        method: "POST",
        json: { content: "remember that I like tea", recall: false },
      }),
      200,
    );
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: 10 } });
    return { t, threadId };
  }

  const messageCount = async (t: Tenant, threadId: string) =>
    (await json<{ total: number }>(await t.get(`/v1/memory/working/threads/${threadId}/messages`), 200)).total;

  it("pauses extraction with the reason visible, loses no message, and resumes once the budget allows", async () => {
    const { t } = await spentTenant("pause");
    expect((await usage(t)).budget).toMatchObject({ monthlyTokenBudget: 10, exhausted: true });

    const threadId = await t.thread("budget");
    await t.conversation(threadId, ["I live in Porto", "Got it.", "I have a cat", "Cute."]);
    const { episodeId } = await t.end(threadId);
    const summariesBefore = h.fake.chatCalls("episode_summary").length;
    await runDueJobs(h.svc.deps);

    // Pending, waiting for the budget; no summary call made; every message stored.
    const waiting = await t.episode(episodeId as string);
    expect(waiting).toMatchObject({ status: "pending", waitingFor: "budget" });
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(summariesBefore);
    const listed = await json<{ episodes: { episodeId: string; waitingFor?: string }[] }>(
      await t.get("/v1/memory/episodic/datasets/budget/episodes?status=pending"),
      200,
    );
    expect(listed.episodes).toEqual([expect.objectContaining({ episodeId, waitingFor: "budget" })]);
    expect(await messageCount(t, threadId)).toBe(4);
    // Its job looks again at the next sweep: a tenth short of a retry interval on.
    const job = (await t.jobs()).find((j) => j.key === `episode:${episodeId}`);
    const interval = h.svc.deps.config.retryIntervalMs;
    expect(job?.runAt).toBe(new Date(h.clock.now().getTime() + interval - interval / 10).toISOString());

    // Meanwhile messages are still stored, and chat says why it does not answer (the spec's error body).
    await t.say(threadId, "One more thing: I moved");
    const chat = await t.get(`/v1/memory/working/threads/${threadId}/chat`, {
      method: "POST",
      json: { content: "Where do I live?", recall: false },
    });
    expect(chat.status).toBe(429);
    expect(Object.keys(await chat.json())).toEqual(["error"]);
    expect(await messageCount(t, threadId)).toBe(6);

    // Raised: the next look resumes it, without anyone asking.
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: null } });
    h.clock.advance(h.svc.deps.config.retryIntervalMs);
    await runDueJobs(h.svc.deps);
    const done = await t.episode(episodeId as string);
    expect(done.status).toBe("completed");
    expect(done).not.toHaveProperty("waitingFor");
    expect(h.fake.chatCalls("episode_summary")).toHaveLength(summariesBefore + 1);
    expect(await messageCount(t, threadId)).toBe(6);
  });

  it("resumes by itself when the month ends", async () => {
    const { t } = await spentTenant("month");
    const threadId = await t.thread("budget");
    await t.conversation(threadId, ["I play chess", "Nice."]);
    const { episodeId } = await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect((await t.episode(episodeId as string)).status).toBe("pending");
    // The messages' embeddings are made in this month too: run in the new one, beside the episode's
    // job, their tokens could spend its budget of 10 first (the new month's budget counts them).
    await embedWaitingMessages(h.svc.deps, h.clock);

    // The job looks again at the month's end at the latest.
    const now = h.clock.now();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    h.clock.advance(nextMonth - now.getTime());
    await runDueJobs(h.svc.deps);
    expect((await t.episode(episodeId as string)).status).toBe("completed");
    // The new month's budget counts only the new month's calls (the episode's, here).
    const report = await usage(t);
    expect(report.budget).toMatchObject({ month: h.clock.now().toISOString().slice(0, 7) });
    expect(report.budget.spent).toBe(report.total.totalTokens);
  });

  it("is checked against the month's total, kept as the ledger is written: a few rows, however many calls", async () => {
    const t = await tenant("month-total");
    await patchProjectSettings(
      { deps: h.svc.deps, projectId: t.projectId },
      { usage: { monthlyTokenBudget: 100_000 } },
    );
    const now = h.clock.now();
    const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 0, 12));
    // 3,000 calls this month (one of unknown usage), 10 last month: as written by many statements.
    const write = (count: number, at: Date, tokens: string) =>
      h.svc.deps.db.execute(sql`
        INSERT INTO usage_events (project_id, dataset, operation, kind, model, total_tokens, outcome, created_at)
        SELECT ${t.projectId}, 'd', 'recall_embedding', 'embedding', 'm', ${sql.raw(tokens)}, 'ok', ${at.toISOString()}::timestamptz
        FROM generate_series(1, ${count}) g`);
    for (let i = 0; i < 3; i++) await write(1000, now, "g % 7");
    await write(1, now, "NULL");
    await write(10, lastMonth, "1000");
    const [month] = rowsOf<{ n: number }>(
      await h.svc.deps.db.execute(sql`SELECT coalesce(sum(total_tokens), 0)::int AS n FROM usage_events
        WHERE project_id = ${t.projectId} AND created_at >= date_trunc('month', ${now.toISOString()}::timestamptz, 'UTC')`),
    );
    expect(month.n).toBeGreaterThan(0);
    expect((await usage(t)).budget).toMatchObject({ spent: month.n, exhausted: false });

    // The check that every chat turn, recall with synthesis and episode claim makes reads no call.
    const plan = planOf(
      await h.svc.deps.db.execute(
        sql`EXPLAIN (ANALYZE, FORMAT JSON) SELECT ${budgetSpentSql(t.projectId, now)} AS spent`,
      ),
    );
    const read = planNodes(plan.Plan).filter((n) => n["Relation Name"]?.startsWith("usage_"));
    expect(read.map((n) => n["Relation Name"])).toEqual(["usage_month_tokens"]);
    expect(read[0]["Actual Rows"]).toBeLessThanOrEqual(16);

    // An operator who prunes ledger rows: the total follows what the ledger holds.
    await h.svc.deps.db.execute(
      sql`DELETE FROM usage_events WHERE project_id = ${t.projectId} AND total_tokens = 6 AND created_at >= ${now.toISOString()}::timestamptz`,
    );
    const pruned = month.n - 6 * 3 * 143; // 143 of each 1,000 had 6 tokens (g % 7 = 6)
    expect((await usage(t)).budget).toMatchObject({ spent: pruned });
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: pruned } });
    expect((await usage(t)).budget).toMatchObject({ spent: pruned, exhausted: true });
  });

  it("makes synthesis null (recall still answers) and fires usage.budget_exhausted once", async () => {
    const t = await tenant("alerts");
    h.fake.onStructured("fact_extraction", () => ({ facts: [fact("likes", "tea", "I like tea")], entities: [] }));
    const threadId = await t.thread("budget");
    await t.conversation(threadId, ["I like tea", "Noted."]);
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    await createWebhookEndpoint(
      { deps: h.svc.deps, projectId: t.projectId },
      { url: "http://127.0.0.1:9/hook", eventTypes: ["usage.budget_exhausted"] },
    );
    const recallBody = { dataset: "budget", query: "what does the user like", include: ["synthesis"] };
    const before = await json<{ context: string; synthesis: string | null }>(
      await t.get("/v1/memory/recall", { method: "POST", json: recallBody }),
      200,
    );
    expect(before.synthesis).not.toBeNull();

    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: 10 } });
    const synthesisCalls = h.fake.chatCalls().length;
    const after = await json<{ context: string; synthesis: string | null }>(
      await t.get("/v1/memory/recall", { method: "POST", json: recallBody }),
      200,
    );
    expect(after).toMatchObject({ context: before.context, synthesis: null });
    expect(h.fake.chatCalls()).toHaveLength(synthesisCalls);

    const deliveries = async () =>
      rowsOf<{ payload: { type: string; data: Record<string, unknown> } }>(
        await h.svc.deps.db.execute(
          sql`SELECT payload FROM webhook_deliveries WHERE project_id = ${t.projectId} AND event_type = 'usage.budget_exhausted'`,
        ),
      );
    expect((await sweep(h.svc.deps)).budgetAlerts).toBeGreaterThanOrEqual(1);
    expect(await sweep(h.svc.deps)).toMatchObject({ budgetAlerts: 0 });
    const sent = await deliveries();
    expect(sent).toHaveLength(1);
    expect(sent[0].payload).toMatchObject({
      type: "usage.budget_exhausted",
      data: { monthlyTokenBudget: 10, month: h.clock.now().toISOString().slice(0, 7) },
    });
    expect(Number(sent[0].payload.data.spent)).toBeGreaterThanOrEqual(10);
  });

  it("skips the reranker while it is spent: the fused order, no model call", async () => {
    const t = await tenant("budget-rerank");
    h.fake.onStructured("fact_extraction", () => ({
      facts: [fact("lives_in", "Paris", "I live in Paris"), fact("owns", "a cat", "I have a cat")],
      entities: [],
    }));
    h.fake.onStructured("rerank_candidates", () => ({ ranking: [2, 1] }));
    const threadId = await t.thread("rerank");
    await t.conversation(threadId, ["I live in Paris", "Noted.", "I have a cat", "Nice."]);
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { semantic: { rerank: true } });
    const recall = async () => {
      const res = await t.get("/v1/memory/recall", {
        method: "POST",
        json: { dataset: "rerank", query: "where does the user live", include: ["raw"] },
      });
      return {
        timing: res.headers.get("server-timing") ?? "",
        body: await json<{
          facts: { object: string; relevanceScore: number }[];
          groups: { groupRelevance: number }[];
        }>(res, 200),
      };
    };
    const reranked = await recall();
    expect(h.fake.chatCalls("rerank_candidates")).toHaveLength(1);
    expect(reranked.timing).toContain("rerank;dur=");
    expect(reranked.timing).toContain('desc="reranked"');
    // Its order, not the fused one, is what the scores say: best first, the groups too.
    const descending = (xs: number[]) => xs.every((x, i) => i === 0 || xs[i - 1] >= x);
    expect(descending(reranked.body.facts.map((f) => f.relevanceScore))).toBe(true);
    expect(descending(reranked.body.groups.map((g) => g.groupRelevance))).toBe(true);

    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: 1 } });
    const skipped = await recall();
    expect(h.fake.chatCalls("rerank_candidates")).toHaveLength(1);
    expect(skipped.timing).toContain('desc="skipped"');
    // The fused order: the reranker had put it the other way round.
    expect(skipped.body.facts.map((f) => f.object)).toEqual([...reranked.body.facts.map((f) => f.object)].reverse());
  });

  it("announces a budget spent after the month's last sweep, naming that month, once", async () => {
    const t = await tenant("month-end");
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: 10 } });
    await createWebhookEndpoint(
      { deps: h.svc.deps, projectId: t.projectId },
      { url: "http://127.0.0.1:9/hook", eventTypes: ["usage.budget_exhausted"] },
    );
    const now = h.clock.now();
    const monthEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    h.clock.advance(monthEnd - 30_000 - now.getTime());
    const spentMonth = h.clock.now().toISOString().slice(0, 7);
    await sweep(h.svc.deps);
    // Spent after the month's last sweep: chat already answers 429.
    await h.svc.deps.db.execute(sql`
      INSERT INTO usage_events (project_id, dataset, operation, kind, model, total_tokens, outcome, created_at)
      VALUES (${t.projectId}, 'd', 'chat', 'chat', 'm', 100, 'ok', ${h.clock.now().toISOString()}::timestamptz)`);
    const [spent] = rowsOf<{ spent: boolean }>(
      await h.svc.deps.db.execute(sql`SELECT ${budgetSpentSql(t.projectId, h.clock.now())} AS spent`),
    );
    expect(spent.spent).toBe(true);

    h.clock.advance(h.svc.deps.config.retryIntervalMs); // the next sweep is in the new month
    await sweep(h.svc.deps);
    await sweep(h.svc.deps);
    const alerts = rowsOf<{ month: string }>(
      await h.svc.deps.db.execute(sql`SELECT month FROM usage_budget_alerts WHERE project_id = ${t.projectId}`),
    );
    expect(alerts).toEqual([{ month: spentMonth }]);
    const sent = rowsOf<{ payload: { data: Record<string, unknown> } }>(
      await h.svc.deps.db.execute(
        sql`SELECT payload FROM webhook_deliveries WHERE project_id = ${t.projectId} AND event_type = 'usage.budget_exhausted'`,
      ),
    );
    expect(sent.map((d) => d.payload.data)).toEqual([
      { month: spentMonth, monthlyTokenBudget: 10, spent: 100, resetsAt: new Date(monthEnd).toISOString() },
    ]);
  });

  it("does not announce the month before against a budget set or lowered after it ended", async () => {
    const t = await tenant("set-on-the-first");
    await createWebhookEndpoint(
      { deps: h.svc.deps, projectId: t.projectId },
      { url: "http://127.0.0.1:9/hook", eventTypes: ["usage.budget_exhausted"] },
    );
    const spendAt = async (tokens: number) =>
      h.svc.deps.db.execute(sql`
        INSERT INTO usage_events (project_id, dataset, operation, kind, model, total_tokens, outcome, created_at)
        VALUES (${t.projectId}, 'd', 'chat', 'chat', 'm', ${tokens}, 'ok', ${h.clock.now().toISOString()}::timestamptz)`);
    const sent = async () =>
      rowsOf<{ payload: { data: Record<string, unknown> } }>(
        await h.svc.deps.db.execute(
          sql`SELECT payload FROM webhook_deliveries WHERE project_id = ${t.projectId} AND event_type = 'usage.budget_exhausted'`,
        ),
      ).map((d) => d.payload.data);
    // An hour before the month ends: 5,000 tokens, no budget at all.
    const now = h.clock.now();
    const monthEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    h.clock.advance(monthEnd - 3_600_000 - now.getTime());
    await spendAt(5_000);
    await sweep(h.svc.deps);
    // 9 a.m. on the 1st: a budget of 1,000 is set, then lowered; nothing spent this month yet.
    h.clock.set(new Date(monthEnd + 9 * 3_600_000));
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: 2_000 } });
    await patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { usage: { monthlyTokenBudget: 1_000 } });
    await sweep(h.svc.deps);
    expect(await sent()).toEqual([]);
    // This month's spending is still measured against it.
    await spendAt(1_500);
    await sweep(h.svc.deps);
    expect(await sent()).toEqual([
      expect.objectContaining({
        month: h.clock.now().toISOString().slice(0, 7),
        monthlyTokenBudget: 1_000,
        spent: 1_500,
      }),
    ]);
  });
});

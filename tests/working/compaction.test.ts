import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { runDueJobs } from "../../lib/jobs/runner";
import { patchProjectSettings } from "../../lib/settings/store";
import { COMPACT_KEEP_RECENT } from "../../lib/working/compaction";
import type { ApiSchema } from "../helpers/api-types";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { adminSession, createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Compaction, auto-compaction, the prepare window and warning, and stats, on the real database
 * with the fake provider writing the summaries.
 */
const W = "/v1/memory/working/threads";
let svc: TestService;
let fake: FakeOpenAI;
const statements: string[] = [];

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake, onQuery: (s) => statements.push(s) });
});
afterAll(async () => {
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.onText((r) => `SUMMARY(${(r.messages.at(-1)?.content.match(/^\[\d+\]/gm) ?? []).length} lines)`);
  // Episodes cut by thread ends in these tests need a summary schema answer.
  fake.onStructured("episode_summary", () => ({ summary: "an episode", keyLearnings: [] }));
  fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
});

type Message = ApiSchema<"Message">;

async function json<T>(res: Response, status: number): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

async function tenant(threshold?: number | null) {
  const t = await newTenant(svc, `compact-${randomUUID().slice(0, 6)}`);
  if (threshold !== undefined) {
    await patchProjectSettings(
      { deps: svc.deps, projectId: t.projectId },
      { working: { autoCompactThreshold: threshold } },
    );
  }
  const api = {
    ...t,
    async thread(dataset = "ds") {
      const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset } });
      return (await json<{ threadId: string }>(res, 201)).threadId;
    },
    async say(threadId: string, content: string, role = "user") {
      const res = await svc.request(`${W}/${threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role, content },
      });
      return json<{ messageId: string; sequenceNumber: number; compacted: boolean }>(res, 201);
    },
    async sayMany(threadId: string, n: number, from = 1) {
      const out = [];
      for (let i = from; i < from + n; i++)
        out.push(await api.say(threadId, `message ${i}`, i % 2 ? "user" : "assistant"));
      return out;
    },
    compact: (threadId: string) => svc.request(`${W}/${threadId}/compact`, { method: "POST", token: t.key }),
    async prepare(threadId: string, messageLimit?: number) {
      const query = messageLimit === undefined ? "" : `?messageLimit=${messageLimit}`;
      const res = await svc.request(`${W}/${threadId}/prepare${query}`, { method: "POST", token: t.key });
      return json<{
        messages: { role: string; content: string }[];
        messageCount: number;
        truncated: boolean;
        compacted: boolean;
        warning?: string;
      }>(res, 200);
    },
    async list(threadId: string) {
      const res = await svc.request(`${W}/${threadId}/messages?limit=100`, { token: t.key });
      return (await json<{ messages: Message[] }>(res, 200)).messages;
    },
    async stats(threadId: string) {
      const res = await svc.request(`${W}/${threadId}/stats`, { token: t.key });
      return json<{
        messageCount: number;
        compactedCount: number;
        compaction: { compactions: number; activeSummary: { fromSequence: number; toSequence: number } | null };
      }>(res, 200);
    },
  };
  return api;
}

describe("POST .../compact", () => {
  it("folds all but the newest messages into one summary message, once", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 10);
    const result = await json<Record<string, unknown>>(await t.compact(threadId), 200);
    expect(result).toEqual({
      threadId,
      summaryMessageId: expect.stringMatching(/^msg_/),
      compactedCount: 10 - COMPACT_KEEP_RECENT,
      fromSequence: 1,
      toSequence: 4,
    });
    // One model call over exactly the folded messages.
    expect(fake.chatCalls()).toHaveLength(1);
    const prompt = fake.chatCalls()[0].messages.at(-1)?.content ?? "";
    expect(prompt.match(/^\[\d+\] \w+: .*$/gm)).toEqual([
      "[1] user: message 1",
      "[2] assistant: message 2",
      "[3] user: message 3",
      "[4] assistant: message 4",
    ]);

    const listed = await t.list(threadId);
    expect(listed.filter((m) => m.compactedAt !== null).map((m) => m.sequenceNumber)).toEqual([1, 2, 3, 4]);
    const summary = listed.find((m) => m.messageId === result.summaryMessageId);
    expect(summary).toMatchObject({
      sequenceNumber: 11,
      role: "system",
      content: "SUMMARY(4 lines)",
      compactedAt: null,
    });

    const window = await t.prepare(threadId);
    expect(window.messages[0]).toEqual({ role: "system", content: "SUMMARY(4 lines)" });
    expect(window.messages.slice(1).map((m) => m.content)).toEqual([5, 6, 7, 8, 9, 10].map((i) => `message ${i}`));
    expect(window).toMatchObject({ messageCount: 6, truncated: false, compacted: true });

    // Nothing left to fold: the other shape, and no model call.
    const again = await json<Record<string, unknown>>(await t.compact(threadId), 200);
    expect(again).toEqual({ ok: true, compacted: false, message: expect.stringContaining("Nothing to compact") });
    expect(fake.chatCalls()).toHaveLength(1);
  });

  it("folds the previous summary into the next, leaving one active summary", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 10);
    const first = await json<{ summaryMessageId: string }>(await t.compact(threadId), 200);
    await t.sayMany(threadId, 8, 11); // seqs 12-19
    const second = await json<Record<string, unknown>>(await t.compact(threadId), 200);
    // Live before: 5-10 and 12-19 (14); the newest 6 stay, so 5-10 and 12-13 are folded.
    expect(second).toMatchObject({ compactedCount: 8, fromSequence: 1, toSequence: 13 });
    const prompt = fake.chatCalls()[1].messages.at(-1)?.content ?? "";
    expect(prompt).toContain("Earlier summary:\nSUMMARY(4 lines)");

    const listed = await t.list(threadId);
    const summaries = listed.filter((m) => m.role === "system");
    expect(summaries.map((m) => [m.messageId, m.compactedAt === null])).toEqual([
      [first.summaryMessageId, false],
      [second.summaryMessageId, true],
    ]);
    const window = await t.prepare(threadId);
    expect(window.messages.map((m) => m.content)).toEqual([
      "SUMMARY(8 lines)",
      ...[14, 15, 16, 17, 18, 19].map((i) => `message ${i - 1}`),
    ]);
    expect(await t.stats(threadId)).toMatchObject({
      messageCount: 18,
      compactedCount: 12,
      compaction: { compactions: 2, activeSummary: { fromSequence: 1, toSequence: 13 } },
    });
  });

  it("two compactions racing on one thread fold each message once", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 12);
    fake.latencyMs = 150; // both read the same state before either writes
    const results = await Promise.all([t.compact(threadId), t.compact(threadId)]);
    const bodies = await Promise.all(results.map((r) => json<Record<string, unknown>>(r, 200)));
    expect(fake.chatCalls()).toHaveLength(2);
    const won = bodies.filter((b) => "summaryMessageId" in b);
    const lost = bodies.filter((b) => b.compacted === false);
    expect(won).toHaveLength(1);
    expect(lost).toEqual([{ ok: true, compacted: false, message: expect.stringContaining("another compaction") }]);
    const listed = await t.list(threadId);
    expect(listed.filter((m) => m.role === "system")).toHaveLength(1);
    expect(listed.filter((m) => m.compactedAt !== null).map((m) => m.sequenceNumber)).toEqual([1, 2, 3, 4, 5, 6]);
    expect((await t.prepare(threadId)).messageCount).toBe(6);
  });

  it("a thread whose dataset is erased during the model call is a 404, and nothing is written", async () => {
    const t = await tenant();
    const threadId = await t.thread("erased-meanwhile");
    await t.sayMany(threadId, 12);
    fake.latencyMs = 200;
    const compacting = t.compact(threadId);
    // Once the fold is read and the model is being asked.
    while (fake.chatCalls().length === 0) await new Promise((r) => setTimeout(r, 5));
    const erased = await svc.request("/v1/memory/recall/datasets/erased-meanwhile", { method: "DELETE", token: t.key });
    expect(erased.status).toBe(200);
    expect(await json(await compacting, 404)).toEqual({ error: "Thread not found" });
    const [left] = rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${threadId}`),
    );
    expect(left.n).toBe(0);
  });

  it("a provider failure is a 500 and changes nothing", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 10);
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const res = await t.compact(threadId);
    expect(await json(res, 500)).toEqual({ error: "Failed to compact thread" });
    expect((await t.list(threadId)).every((m) => m.compactedAt === null)).toBe(true);
    expect(await t.prepare(threadId)).toMatchObject({ messageCount: 10, compacted: false });
  });

  it("a summary of only whitespace is a failure: the messages stay, no empty summary is stored", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 10);
    fake.onText(() => "   \n ");
    expect(await json(await t.compact(threadId), 500)).toEqual({ error: "Failed to compact thread" });
    expect((await t.list(threadId)).every((m) => m.compactedAt === null)).toBe(true);
    const prepared = await t.prepare(threadId);
    expect(prepared).toMatchObject({ messageCount: 10, compacted: false });
    expect(prepared.messages.every((m) => m.content.trim() !== "")).toBe(true);
  });

  it("404 for an unknown thread and another project's thread", async () => {
    const t = await tenant();
    const other = await tenant();
    const theirs = await other.thread();
    for (const id of ["thr_nope", theirs]) {
      expect(await json(await t.compact(id), 404)).toEqual({ error: "Thread not found" });
    }
  });

  it("summaries stay out of episode transcripts", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 10);
    await json(await t.compact(threadId), 200);
    await svc.request(`/v1/threads/${threadId}/end`, { method: "POST", token: t.key });
    await runDueJobs(svc.deps);
    const transcript = fake.chatCalls("episode_summary").at(-1)?.messages.at(-1)?.content ?? "";
    expect(transcript).toContain("message 1");
    expect(transcript).not.toContain("SUMMARY(");
  });
});

describe("auto-compaction", () => {
  it("an insert that reaches autoCompactThreshold compacts inline and says so", async () => {
    const t = await tenant(10);
    const threadId = await t.thread();
    const first = await t.sayMany(threadId, 9);
    expect(first.every((m) => m.compacted === false)).toBe(true);
    expect(fake.chatCalls()).toHaveLength(0);
    const tenth = await t.say(threadId, "message 10");
    expect(tenth.compacted).toBe(true);
    expect(await t.stats(threadId)).toMatchObject({
      compaction: { compactions: 1, activeSummary: { fromSequence: 1, toSequence: 4 } },
    });
    // 6 live now; the next crossing is at 10 live again (four more inserts).
    const more = await t.sayMany(threadId, 4, 11);
    expect(more.map((m) => m.compacted)).toEqual([false, false, false, true]);
    expect(fake.chatCalls()).toHaveLength(2);
    // The thread counts the 14 messages written, as its stats do: not the two summaries' numbers.
    const thread = await json<{ messageCount: number }>(
      await svc.request(`/v1/threads/${threadId}`, { token: t.key }),
      200,
    );
    expect({ thread: thread.messageCount, stats: (await t.stats(threadId)).messageCount }).toEqual({
      thread: 14,
      stats: 14,
    });
  });

  it("a provider failure still stores the message (201, compacted false) and retries at the next multiple", async () => {
    const t = await tenant(10);
    const threadId = await t.thread();
    await t.sayMany(threadId, 9);
    fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const tenth = await t.say(threadId, "message 10");
    expect(tenth.compacted).toBe(false);
    expect((await t.list(threadId)).map((m) => m.content)).toContain("message 10");
    // No retry on every insert: only a threshold more messages on (20). Meanwhile prepare says
    // what its window leaves out.
    const more = await t.sayMany(threadId, 9, 11);
    expect(more.every((m) => m.compacted === false)).toBe(true);
    expect((await t.prepare(threadId, 12)).warning).toBe(
      "7 un-compacted messages are left out of the window: the thread has 19, above autoCompactThreshold 10, and is compacted at a later write (or compact it now)",
    );
    expect((await t.say(threadId, "message 20")).compacted).toBe(true);
    expect(fake.chatCalls()).toHaveLength(2);
  });

  it("a thread already past a threshold lowered or turned on compacts at its next write", async () => {
    const t = await tenant(null);
    const threadId = await t.thread();
    await t.sayMany(threadId, 25);
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: 20 } });
    expect((await t.say(threadId, "message 26")).compacted).toBe(true);
    expect(await t.stats(threadId)).toMatchObject({ compaction: { compactions: 1 } });
    // And through the batch route, a thread past it from before.
    const other = await t.thread();
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: null } });
    await t.sayMany(other, 25);
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: 20 } });
    const batch = await json<{ compactedThreadIds: string[] }>(
      await svc.request("/v1/memory/working/messages:batch", {
        method: "POST",
        token: t.key,
        json: { messages: [{ threadId: other, role: "user", content: "one more" }] },
      }),
      201,
    );
    expect(batch.compactedThreadIds).toEqual([other]);
  });

  it("is off when autoCompactThreshold is null: no model call, no warning", async () => {
    const t = await tenant(null);
    const threadId = await t.thread();
    const sent = await t.sayMany(threadId, 25);
    expect(sent.some((m) => m.compacted)).toBe(false);
    expect(fake.chatCalls()).toHaveLength(0);
    const window = await t.prepare(threadId, 5);
    expect(window.warning).toBeUndefined();
    expect(window).toMatchObject({ messageCount: 25, truncated: true, compacted: false });
  });

  it("costs the insert no extra statement when it does not compact", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    statements.length = 0;
    await t.say(threadId, "hello");
    expect(statements).toHaveLength(2);
  });
});

describe("prepare", () => {
  it("warns when messageLimit is below autoCompactThreshold (default 20)", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 3);
    expect((await t.prepare(threadId, 19)).warning).toBe(
      "messageLimit 19 is below autoCompactThreshold 20: up to 1 un-compacted messages can be left out of the window",
    );
    expect((await t.prepare(threadId, 20)).warning).toBeUndefined();
    expect((await t.prepare(threadId)).warning).toBeUndefined();
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: 50 } });
    expect((await t.prepare(threadId)).warning).toContain("autoCompactThreshold 50");
  });

  it("puts the summary first without counting it against messageLimit, and never returns compacted rows", async () => {
    const t = await tenant();
    const threadId = await t.thread();
    await t.sayMany(threadId, 12);
    await json(await t.compact(threadId), 200);
    const window = await t.prepare(threadId, 3);
    expect(window.messages.map((m) => m.content)).toEqual([
      "SUMMARY(6 lines)",
      "message 10",
      "message 11",
      "message 12",
    ]);
    expect(window).toMatchObject({ messageCount: 6, truncated: true, compacted: true });
    statements.length = 0;
    await t.prepare(threadId, 3);
    expect(statements).toHaveLength(2);
  });
});

describe("settings", () => {
  it("autoCompactThreshold is an integer 10-1000 or null, patched and read through the dashboard", async () => {
    const token = await adminSession(svc);
    const t = await tenant();
    const patch = (value: unknown) =>
      svc.request(`/dashboard/projects/${t.projectId}/settings`, {
        method: "PATCH",
        token,
        json: { working: { autoCompactThreshold: value } },
      });
    for (const bad of [9, 1001, 12.5, "20"]) expect((await patch(bad)).status).toBe(400);
    const set = await json<{ settings: { working: unknown } }>(await patch(null), 200);
    expect(set.settings.working).toEqual({ autoCompactThreshold: null });
    const [row] = rowsOf<{ settings: unknown }>(
      await svc.deps.db.execute(sql`SELECT settings FROM projects WHERE id = ${t.projectId}`),
    );
    expect(JSON.stringify(row.settings)).toContain('"autoCompactThreshold":null');
    expect((await json<{ settings: { working: unknown } }>(await patch(100), 200)).settings.working).toEqual({
      autoCompactThreshold: 100,
    });
  });
});

import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, beforeEach, expect } from "vitest";
import type { manualClock } from "../../lib/clock";
import { rowsOf, toIso } from "../../lib/db/rows";
import { deleteProject } from "../../lib/projects";
import { patchProjectSettings } from "../../lib/settings/store";
import type { ApiSchema } from "./api-types";
import { type ChatRequest, type FakeOpenAI, startFakeOpenAI } from "./fake-openai";
import { createTestService, newTenant, type TestService, type TestServiceOptions } from "./service";

/**
 * Shared set-up for the episodic and background-work tests: one service per file on a manual
 * clock against the fake provider, a tenant per test that is deleted (with its threads, episodes
 * and jobs) after the test, so a sweep in one test never runs another test's work.
 */
export type ManualClock = ReturnType<typeof manualClock>;

/** An episode as the API answers it. */
export type Episode = ApiSchema<"Episode">;

export interface JobRow {
  key: string;
  kind: string;
  runAt: string;
  attempts: number;
  lockedUntil: string | null;
  payload: Record<string, unknown>;
  lastError: string | null;
}

/** The transcript lines a summary request carried (`[seq] role: text`, or the omission marker). */
export function transcriptLines(request: ChatRequest): string[] {
  const user = request.messages.find((m) => m.role === "user");
  return (user?.content ?? "").split("\n");
}

/** Message texts of a transcript, without sequence numbers, roles and markers. */
export function transcriptTexts(request: ChatRequest): string[] {
  return transcriptLines(request)
    .map((line) => /^\[\d+\] \w+: (.*)$/.exec(line)?.[1])
    .filter((t): t is string => t !== undefined);
}

/** The default scripted answer: the summary is the messages' texts, so tests know what was embedded. */
export function echoSummary(request: ChatRequest) {
  const texts = transcriptTexts(request);
  return { summary: texts.join(" "), keyLearnings: texts.length > 0 ? [`first: ${texts[0]}`] : [] };
}

/** A promise the test opens by hand (to hold a model call while it looks at the state). */
export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

export function useEpisodicService(options: Omit<TestServiceOptions, "provider" | "manualTime"> = {}) {
  const h = {} as {
    svc: TestService;
    fake: FakeOpenAI;
    clock: ManualClock;
  };
  const projects: string[] = [];
  beforeAll(async () => {
    h.fake = await startFakeOpenAI();
    h.svc = await createTestService({ ...options, provider: h.fake, manualTime: true });
    h.clock = h.svc.clock as ManualClock;
  });
  afterAll(async () => {
    await h.svc?.close();
    await h.fake?.close();
  });
  beforeEach(() => {
    h.fake.reset();
    h.fake.onStructured("episode_summary", echoSummary);
    // Fact extraction follows every summary; these tests are about episodes, so it finds nothing.
    h.fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
  });
  afterEach(async () => {
    await h.svc.settle();
    for (const id of projects.splice(0)) await deleteProject({ deps: h.svc.deps, projectId: id });
  });

  const request = (path: string, init?: Parameters<TestService["request"]>[1]) => h.svc.request(path, init);

  async function json<T>(res: Response, status: number): Promise<T> {
    const text = await res.text();
    expect(res.status, text).toBe(status);
    return JSON.parse(text) as T;
  }

  /** A new project and API key, deleted after the test. */
  async function tenant(name = "episodic") {
    const t = await newTenant(h.svc, name);
    projects.push(t.projectId);
    // Episode tests count model calls and read sequence numbers in transcripts: auto-compaction
    // (tested in compaction.test.ts) would add a call and a summary message's number.
    await patchProjectSettings(
      { deps: h.svc.deps, projectId: t.projectId },
      { working: { autoCompactThreshold: null } },
    );
    const key = t.key;
    const api = {
      ...t,
      async thread(dataset = "ds", episodic?: Record<string, unknown>) {
        const res = await request("/v1/threads", {
          method: "POST",
          token: key,
          json: { dataset, ...(episodic ? { settings: { episodic } } : {}) },
        });
        return (await json<{ threadId: string; dataset: string }>(res, 201)).threadId;
      },
      async say(threadId: string, content: string, role = "user") {
        const res = await request(`/v1/memory/working/threads/${threadId}/messages`, {
          method: "POST",
          token: key,
          json: { role, content },
        });
        return json<{ messageId: string; sequenceNumber: number; createdAt: string }>(res, 201);
      },
      /** Messages one `stepMs` apart on the manual clock. */
      async conversation(threadId: string, contents: string[], stepMs = 1000) {
        const out = [];
        for (const [i, content] of contents.entries()) {
          if (i > 0) h.clock.advance(stepMs);
          out.push(await api.say(threadId, content, i % 2 === 0 ? "user" : "assistant"));
        }
        return out;
      },
      async end(threadId: string) {
        const res = await request(`/v1/threads/${threadId}/end`, { method: "POST", token: key });
        return json<{ threadId: string; dataset: string; endedAt: string; episodeId: string | null }>(res, 200);
      },
      async episode(episodeId: string) {
        const res = await request(`/v1/memory/episodic/episodes/${episodeId}`, { token: key });
        return (await json<{ episode: Episode }>(res, 200)).episode;
      },
      get: (path: string, init?: Parameters<TestService["request"]>[1]) => request(path, { token: key, ...init }),
      /** Episodes of this tenant straight from the table (any status), oldest first. */
      async episodes() {
        return rowsOf<{ id: string; status: string; thread_id: string; message_count: number; metadata: unknown }>(
          await h.svc.deps.db.execute(
            sql`SELECT id, status, thread_id, message_count, metadata FROM episodes WHERE project_id = ${t.projectId} ORDER BY created_at, from_seq`,
          ),
        );
      },
      /** Jobs of this tenant, by key. */
      async jobs(): Promise<JobRow[]> {
        const rows = rowsOf<{
          key: string;
          kind: string;
          run_at: unknown;
          attempts: number;
          locked_until: unknown;
          payload: Record<string, unknown> | string;
          last_error: string | null;
        }>(
          await h.svc.deps.db.execute(
            sql`SELECT key, kind, run_at, attempts, locked_until, payload, last_error FROM jobs WHERE project_id = ${t.projectId} ORDER BY key`,
          ),
        );
        return rows.map((r) => ({
          key: r.key,
          kind: r.kind,
          runAt: toIso(r.run_at) as string,
          attempts: Number(r.attempts),
          lockedUntil: toIso(r.locked_until),
          payload: typeof r.payload === "string" ? JSON.parse(r.payload) : r.payload,
          lastError: r.last_error,
        }));
      },
    };
    return api;
  }

  /** Summary calls whose transcript mentions `marker` (calls of this test's own episodes). */
  const summaryCalls = (marker = "") =>
    h.fake
      .chatCalls()
      .filter((c) => c.response_format?.json_schema?.name === "episode_summary")
      .filter((c) => transcriptLines(c).some((l) => l.includes(marker)));

  const iso = (offsetMs = 0) => new Date(h.clock.now().getTime() + offsetMs).toISOString();

  return { h, request, json, tenant, summaryCalls, iso };
}

export type Tenant = Awaited<ReturnType<ReturnType<typeof useEpisodicService>["tenant"]>>;

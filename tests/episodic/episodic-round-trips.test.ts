import { describe, expect, it } from "vitest";
import { runDueJobs } from "../../lib/jobs/runner";
import { type Tenant, useEpisodicService } from "../helpers/episodic-fixtures";
import type { TestService } from "../helpers/service";

/**
 * DESIGN: at most 2 sequential SQL statements per /v1 request (authenticate, then work), for the
 * episodic routes and the trigger routes of issue 3, on success and on failure alike.
 */
const statements: string[] = [];
let recording = false;
const { h, tenant } = useEpisodicService({
  onQuery: (sql) => {
    if (recording) statements.push(sql);
  },
});

const BUDGET = 2;
const E = "/v1/memory/episodic";

async function measured(path: string, init: Parameters<TestService["request"]>[1] = {}) {
  statements.length = 0;
  recording = true;
  try {
    const res = await h.svc.request(path, init);
    const body = await res.text();
    return { status: res.status, body, statements: [...statements] };
  } finally {
    recording = false;
  }
}

interface Fixture extends Tenant {
  threadId: string;
  completed: string;
  failed: string;
  archived: string;
}

async function setup(): Promise<Fixture> {
  const t = await tenant();
  const episode = async (content: string) => {
    const threadId = await t.thread("rt");
    await t.conversation(threadId, [content, `${content} reply`]);
    return { threadId, episodeId: (await t.end(threadId)).episodeId as string };
  };
  const completed = (await episode("completed words")).episodeId;
  const archived = (await episode("archived words")).episodeId;
  await runDueJobs(h.svc.deps);
  h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
  const failed = (await episode("failed words")).episodeId;
  await runDueJobs(h.svc.deps);
  expect((await t.get(`${E}/episodes/${archived}`, { method: "DELETE" })).status).toBe(200);
  const { threadId } = await episode("open thread");
  await t.say(threadId, "new message");
  return { ...t, threadId, completed, failed, archived };
}

type Case = [name: string, status: number, build: (f: Fixture) => [string, Parameters<TestService["request"]>[1]]];

const cases: Case[] = [
  ["list episodes", 200, (f) => [`${E}/datasets/rt/episodes?limit=5&status=completed`, { token: f.key }]],
  ["list episodes with cursor", 200, (f) => [`${E}/datasets/rt/episodes?before=2999-01-01`, { token: f.key }]],
  ["list episodes, invalid status", 400, (f) => [`${E}/datasets/rt/episodes?status=all`, { token: f.key }]],
  ["search episodes", 200, (f) => [`${E}/datasets/rt/episodes/search?q=completed&limit=3`, { token: f.key }]],
  ["search episodes, q missing", 400, (f) => [`${E}/datasets/rt/episodes/search`, { token: f.key }]],
  ["get episode", 200, (f) => [`${E}/episodes/${f.completed}`, { token: f.key }]],
  ["get unknown episode", 404, (f) => [`${E}/episodes/epi_unknown`, { token: f.key }]],
  ["archive episode", 200, (f) => [`${E}/episodes/${f.completed}`, { method: "DELETE", token: f.key }]],
  ["archive archived episode", 400, (f) => [`${E}/episodes/${f.archived}`, { method: "DELETE", token: f.key }]],
  ["archive unknown episode", 404, (f) => [`${E}/episodes/epi_unknown`, { method: "DELETE", token: f.key }]],
  ["retry failed episode", 200, (f) => [`${E}/episodes/${f.failed}/retry`, { method: "POST", token: f.key }]],
  ["retry completed episode", 400, (f) => [`${E}/episodes/${f.completed}/retry`, { method: "POST", token: f.key }]],
  ["retry unknown episode", 404, (f) => [`${E}/episodes/epi_unknown/retry`, { method: "POST", token: f.key }]],
  ["end thread with new messages", 200, (f) => [`/v1/threads/${f.threadId}/end`, { method: "POST", token: f.key }]],
  [
    "create sibling thread (pull-forward)",
    201,
    (f) => ["/v1/threads", { method: "POST", token: f.key, json: { dataset: "rt" } }],
  ],
  [
    "add message (idle timer)",
    201,
    (f) => [
      `/v1/memory/working/threads/${f.threadId}/messages`,
      { method: "POST", token: f.key, json: { role: "user", content: "hello" } },
    ],
  ],
];

describe("round trips per episodic /v1 request", () => {
  it.each(cases)(`%s (status %i) sends at most ${BUDGET} statements`, async (_name, status, build) => {
    const f = await setup();
    const [path, init] = build(f);
    const m = await measured(path, init);
    expect(m.status, m.body).toBe(status);
    expect(m.statements.length, m.statements.join("\n---\n")).toBeLessThanOrEqual(BUDGET);
    expect(m.statements[0]).toMatch(/api_keys/);
  });

  it("the pull-forward and the idle timer ride in the statement that creates the thread or appends the message", async () => {
    const f = await setup();
    const created = await measured("/v1/threads", { method: "POST", token: f.key, json: { dataset: "rt" } });
    expect(created.statements).toHaveLength(2);
    expect(created.statements[1]).toMatch(/insert into "jobs"/i);
    expect((await f.jobs()).find((j) => j.key === `idle:${f.threadId}`)?.payload.pulled).toBe(true);
  });
});

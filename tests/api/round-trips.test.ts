import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { patchProjectSettings } from "../../lib/settings/store";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * DESIGN: at most 2 sequential SQL statements per /v1 request (authenticate, then work), because
 * over HTTP drivers every statement is a network round trip. The instrumented driver reports each
 * statement it sends; only those issued while one request is being served are counted.
 */
let svc: TestService;
const statements: string[] = [];
let recording = false;
beforeAll(async () => {
  svc = await createTestService({
    onQuery: (sql) => {
      if (recording) statements.push(sql);
    },
  });
});
afterAll(() => svc.close());

const BUDGET = 2;
const W = "/v1/memory/working/threads";

/** Serve one request and return its response with the statements sent while serving it. */
async function measured(path: string, init: Parameters<TestService["request"]>[1] = {}) {
  statements.length = 0;
  recording = true;
  try {
    const res = await svc.request(path, init);
    await res.arrayBuffer();
    return { status: res.status, statements: [...statements] };
  } finally {
    recording = false;
  }
}

async function setup() {
  const t = await newTenant(svc);
  const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "rt" } });
  const { threadId } = (await res.json()) as { threadId: string };
  for (let i = 0; i < 30; i++) {
    const add = await svc.request(`${W}/${threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: i % 2 ? "assistant" : "user", content: `m${i}`, tokens: { input: 1, output: 2, total: 3 } },
    });
    expect(add.status).toBe(201);
  }
  return { ...t, threadId };
}

type Case = [
  name: string,
  status: number,
  request: (t: Awaited<ReturnType<typeof setup>>) => [string, Parameters<TestService["request"]>[1]],
];

const cases: Case[] = [
  [
    "create thread",
    201,
    (t) => [
      "/v1/threads",
      {
        method: "POST",
        token: t.key,
        json: { dataset: "rt", tags: ["a"], settings: { episodic: { maxMessages: 5, enabled: null } } },
      },
    ],
  ],
  ["get thread", 200, (t) => [`/v1/threads/${t.threadId}`, { token: t.key }]],
  [
    "patch thread",
    200,
    (t) => [
      `/v1/threads/${t.threadId}`,
      { method: "PATCH", token: t.key, json: { tags: ["b"], settings: { episodic: { maxRetries: 1 } } } },
    ],
  ],
  ["end thread", 200, (t) => [`/v1/threads/${t.threadId}/end`, { method: "POST", token: t.key }]],
  [
    "add message",
    201,
    (t) => [
      `${W}/${t.threadId}/messages`,
      {
        method: "POST",
        token: t.key,
        json: { role: "user", content: "hi", tokens: { input: 1 }, metadata: { agentName: "a" } },
      },
    ],
  ],
  [
    "add messages (batch)",
    201,
    (t) => [
      `${W}/${t.threadId}/messages:batch`,
      {
        method: "POST",
        token: t.key,
        json: {
          messages: Array.from({ length: 9 }, (_, i) => ({ role: "user", content: `b${i}`, tokens: { input: i } })),
        },
      },
    ],
  ],
  [
    "add messages across threads (batch)",
    201,
    (t) => [
      "/v1/memory/working/messages:batch",
      {
        method: "POST",
        token: t.key,
        json: { messages: [{ threadId: t.threadId, role: "user", content: "x" }] },
      },
    ],
  ],
  ["list messages", 200, (t) => [`${W}/${t.threadId}/messages?limit=10&before=25&order=desc`, { token: t.key }]],
  [
    "prepare (body)",
    200,
    (t) => [`${W}/${t.threadId}/prepare`, { method: "POST", token: t.key, json: { messageLimit: 5 } }],
  ],
  ["prepare (query)", 200, (t) => [`${W}/${t.threadId}/prepare?messageLimit=5`, { method: "POST", token: t.key }]],
  ["stats", 200, (t) => [`${W}/${t.threadId}/stats`, { token: t.key }]],
  // Failures stay within the budget too.
  ["get unknown thread", 404, (t) => ["/v1/threads/thr_unknown", { token: t.key }]],
  [
    "patch unknown thread",
    404,
    (t) => ["/v1/threads/thr_unknown", { method: "PATCH", token: t.key, json: { tags: [] } }],
  ],
  ["end unknown thread", 404, (t) => ["/v1/threads/thr_unknown/end", { method: "POST", token: t.key }]],
  [
    "add to unknown thread",
    404,
    (t) => [`${W}/thr_unknown/messages`, { method: "POST", token: t.key, json: { role: "user", content: "x" } }],
  ],
  [
    "batch to unknown thread",
    404,
    (t) => [
      `${W}/thr_unknown/messages:batch`,
      { method: "POST", token: t.key, json: { messages: [{ role: "user", content: "x" }] } },
    ],
  ],
  [
    "batch before the thread's last message",
    400,
    (t) => [
      `${W}/${t.threadId}/messages:batch`,
      {
        method: "POST",
        token: t.key,
        json: { messages: [{ role: "user", content: "x", createdAt: "2020-01-01T00:00:00Z" }] },
      },
    ],
  ],
  [
    "recall with messages",
    200,
    (t) => ["/v1/memory/recall", { method: "POST", token: t.key, json: { dataset: "rt", include: ["messages"] } }],
  ],
  ["list unknown thread", 404, (t) => [`${W}/thr_unknown/messages`, { token: t.key }]],
  ["prepare unknown thread", 404, (t) => [`${W}/thr_unknown/prepare`, { method: "POST", token: t.key }]],
  ["stats unknown thread", 404, (t) => [`${W}/thr_unknown/stats`, { token: t.key }]],
  [
    "invalid message",
    400,
    (t) => [`${W}/${t.threadId}/messages`, { method: "POST", token: t.key, json: { role: "bot", content: "" } }],
  ],
  ["invalid list query", 400, (t) => [`${W}/${t.threadId}/messages?limit=0`, { token: t.key }]],
  [
    "invalid key",
    401,
    () => ["/v1/threads", { method: "POST", token: `mk_${"f".repeat(64)}`, json: { dataset: "x" } }],
  ],
];

describe("round trips per /v1 request", () => {
  it.each(cases)(`%s (status %i) sends at most ${BUDGET} statements`, async (_name, status, build) => {
    const t = await setup();
    const [path, init] = build(t);
    const m = await measured(path, init);
    expect(m.status).toBe(status);
    expect(m.statements.length, m.statements.join("\n---\n")).toBeLessThanOrEqual(BUDGET);
    // The hook sees the request at all: authentication is always one statement.
    expect(m.statements.length).toBeGreaterThanOrEqual(1);
    expect(m.statements[0]).toMatch(/api_keys/);
  });

  it("counts the work statement of a successful request (auth, then one statement)", async () => {
    const t = await setup();
    const add = await measured(`${W}/${t.threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: "user", content: "counted" },
    });
    expect(add.status).toBe(201);
    expect(add.statements).toHaveLength(2);
    expect(add.statements[1]).toMatch(/insert into "messages"/i);
    expect(add.statements[1]).toMatch(/update "threads"/i);
  });

  it("adds a batch in one statement after authentication (counter, messages and timer together)", async () => {
    const t = await setup();
    // Auto-compaction off: a batch crossing the threshold also compacts (statements of its own).
    await patchProjectSettings({ deps: svc.deps, projectId: t.projectId }, { working: { autoCompactThreshold: null } });
    const batch = await measured(`${W}/${t.threadId}/messages:batch`, {
      method: "POST",
      token: t.key,
      json: { messages: Array.from({ length: 100 }, (_, i) => ({ role: "user", content: `n${i}` })) },
    });
    expect(batch.status).toBe(201);
    expect(batch.statements).toHaveLength(2);
    expect(batch.statements[1]).toMatch(/insert into "messages"/i);
    expect(batch.statements[1]).toMatch(/update "threads"/i);
  });

  it("sends no statement at all for a request rejected before authentication", async () => {
    // No credential to look up: no statement, whatever the body (it is never read).
    const missing = await measured("/v1/threads", { method: "POST", json: { dataset: "x" } });
    expect(missing.status).toBe(401);
    expect(missing.statements).toEqual([]);
    const missingBig = await measured("/v1/threads", { method: "POST", json: { dataset: "x".repeat(1024 * 1024) } });
    expect(missingBig.status).toBe(401);
    expect(missingBig.statements).toEqual([]);
    // A method and path no route answers is 404 before authentication.
    const t = await setup();
    const unknown = await measured(`${W}/${t.threadId}/nowhere`, { method: "POST", token: t.key, json: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.statements).toEqual([]);
  });

  it("sends only the credential lookup for a body over the limit (authentication comes first)", async () => {
    const t = await setup();
    const big = await measured(`${W}/${t.threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: "user", content: "x".repeat(1024 * 1024) },
    });
    expect(big.status).toBe(413);
    expect(big.statements).toHaveLength(1);
    expect(big.statements[0]).toMatch(/^update "api_keys"/i);
  });
});

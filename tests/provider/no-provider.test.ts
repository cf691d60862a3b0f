import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { facts } from "../../lib/db/schema";
import { NO_PROVIDER_MESSAGE } from "../../lib/errors";
import type { OpenApiDoc } from "../helpers/openapi";
import { adminSession, createTestService, newTenant, serveOverHttp, type TestService } from "../helpers/service";

/**
 * No model provider configured (neither OPENAI_API_KEY nor OPENAI_BASE_URL): every route that needs
 * a model answers its own 500 with the hint in `detail` (the run contract's "500 on chat"), after
 * authentication, validation and the 404 of its
 * resource; the routes that can do without a model (recall, its playground, the MCP tools) still
 * answer, recall by keyword; and a message added past the auto-compaction threshold is kept.
 */
let svc: TestService;
let http: Awaited<ReturnType<typeof serveOverHttp>>;

beforeAll(async () => {
  svc = await createTestService({ env: { OPENAI_API_KEY: "", OPENAI_BASE_URL: "" } });
  http = await serveOverHttp(svc);
});
afterAll(async () => {
  await http?.close();
  await svc?.close();
});

const W = "/v1/memory/working/threads";

/** A tenant with a thread of `count` messages and one fact (stored directly: no model to extract it). */
async function tenantWithThread(count: number) {
  const t = await newTenant(svc, "no-provider");
  const created = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "user-42" } });
  const { threadId } = (await created.json()) as { threadId: string };
  for (let i = 0; i < count; i++) {
    const res = await svc.request(`${W}/${threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: i % 2 ? "assistant" : "user", content: `message ${i} about the trip to Lisbon` },
    });
    expect(res.status).toBe(201);
  }
  await svc.deps.db.insert(facts).values({
    id: `fct_np_${t.projectId}`,
    projectId: t.projectId,
    dataset: "user-42",
    subject: "user",
    predicate: "lives_in",
    object: "Lisbon",
    confidence: 0.9,
    sourceQuote: "I moved to Lisbon last spring.",
    validAt: new Date("2026-01-01T00:00:00Z"),
  });
  return { ...t, threadId };
}

/** Each route that needs a model, as a request of the tenant (method, path, body, headers), and its 500 message. */
function modelRoutes(threadId: string) {
  return [
    {
      operation: "post /v1/memory/working/threads/{threadId}/chat",
      path: `${W}/${threadId}/chat`,
      json: { content: "Where do I live?" },
      error: "Failed to generate reply",
    },
    {
      operation: "post /v1/memory/working/threads/{threadId}/chat",
      path: `${W}/${threadId}/chat`,
      json: { content: "Where do I live?" },
      headers: { accept: "text/event-stream" },
      error: "Failed to generate reply",
    },
    {
      operation: "post /v1/memory/working/threads/{threadId}/compact",
      path: `${W}/${threadId}/compact`,
      json: undefined,
      error: "Failed to compact thread",
    },
    {
      operation: "get /v1/memory/episodic/datasets/{dataset}/episodes/search",
      path: "/v1/memory/episodic/datasets/user-42/episodes/search?q=trip%20to%20Lisbon",
      error: "Failed to search episodes",
    },
  ];
}

describe("routes that need a model, without a provider", () => {
  it("the routes walked here are every operation whose 500 says it needs a provider; none but /health declares a 503", async () => {
    const doc = (await (await svc.request("/openapi.json")).json()) as OpenApiDoc & {
      paths: Record<string, Record<string, { responses?: Record<string, { description?: string }> }>>;
    };
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ operation: `${method} ${path}`, path, op })),
    );
    const declaring = operations
      .filter(({ op }) => op.responses?.["500"]?.description?.includes("no model provider configured"))
      .map(({ operation }) => operation);
    expect(declaring.sort()).toEqual([...new Set(modelRoutes("x").map((r) => r.operation))].sort());
    expect(operations.filter(({ op }) => op.responses?.["503"]).map(({ path }) => path)).toEqual(["/health"]);
  });

  it("each answers its 500 with the hint in detail, as JSON, and stores nothing", async () => {
    const t = await tenantWithThread(8);
    for (const route of modelRoutes(t.threadId)) {
      const res = await svc.request(route.path, {
        method: route.operation.startsWith("post") ? "POST" : "GET",
        token: t.key,
        headers: route.headers,
        json: route.json,
      });
      expect(res.status, `${route.operation} ${JSON.stringify(route.headers ?? {})}`).toBe(500);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({ error: route.error, detail: NO_PROVIDER_MESSAGE });
    }
    expect(NO_PROVIDER_MESSAGE).toMatch(/set OPENAI_API_KEY, or OPENAI_BASE_URL/);
    // Nothing stored by chat, nothing compacted: the 8 messages, none folded.
    const list = await svc.request(`${W}/${t.threadId}/messages?limit=100`, { token: t.key });
    const { messages } = (await list.json()) as { messages: { content: string; compactedAt: string | null }[] };
    expect(messages).toHaveLength(8);
    expect(messages.every((m) => m.compactedAt === null)).toBe(true);
  });

  it("authentication, validation and the resource's 404 still come first", async () => {
    const t = await tenantWithThread(0);
    const other = await newTenant(svc, "other");
    const search = "/v1/memory/episodic/datasets/user-42/episodes/search";
    expect((await svc.request(`${search}?q=x`)).status).toBe(401);
    expect((await svc.request(`${search}?q=x`, { token: "mem_invalid" })).status).toBe(401);
    const invalid = await svc.request(`${search}?q=`, { token: t.key });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { issues: { path: string[] }[] }).issues[0].path).toEqual(["q"]);
    for (const [token, id] of [
      [t.key, "thr_unknown"],
      [other.key, t.threadId],
    ]) {
      const res = await svc.request(`${W}/${id}/compact`, { method: "POST", token });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: "Thread not found" });
    }
    // A thread with nothing to fold needs no model: the ordinary answer.
    const nothing = await svc.request(`${W}/${t.threadId}/compact`, { method: "POST", token: t.key });
    expect(nothing.status).toBe(200);
    expect(await nothing.json()).toMatchObject({ ok: true, compacted: false });
  });
});

describe("what does without a model, without a provider", () => {
  it("recall falls back to keyword search (synthesis null), and so does the dashboard's playground", async () => {
    const t = await tenantWithThread(0);
    const res = await svc.request("/v1/memory/recall", {
      method: "POST",
      token: t.key,
      json: { dataset: "user-42", query: "Where does the user live? Lisbon?", include: ["raw", "synthesis"] },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { facts: { factId: string }[]; synthesis: string | null; context: string };
    expect(body.facts.map((f) => f.factId)).toEqual([`fct_np_${t.projectId}`]);
    expect(body.context).toMatch(/Lisbon/);
    expect(body.synthesis).toBeNull();

    const playground = await svc.request(`/dashboard/projects/${t.projectId}/recall`, {
      method: "POST",
      token: await adminSession(svc),
      json: { dataset: "user-42", query: "Lisbon" },
    });
    expect(playground.status).toBe(200);
    expect(await playground.json()).toMatchObject({ mode: "keyword", recall: { factCount: 1 } });
  });

  it("adding a message past autoCompactThreshold keeps it (compaction is skipped, not failed)", async () => {
    const t = await tenantWithThread(0);
    const admin = await adminSession(svc);
    const patched = await svc.request(`/dashboard/projects/${t.projectId}/settings`, {
      method: "PATCH",
      token: admin,
      json: { working: { autoCompactThreshold: 10 } },
    });
    expect(patched.status).toBe(200);
    let last: Response | undefined;
    for (let i = 0; i < 11; i++) {
      last = await svc.request(`${W}/${t.threadId}/messages`, {
        method: "POST",
        token: t.key,
        json: { role: "user", content: `turn ${i}` },
      });
      expect(last.status).toBe(201);
    }
    expect(await last?.json()).toMatchObject({ sequenceNumber: 11, compacted: false });
  });

  it("the MCP tools need no model: recall answers by keyword, add_messages stores", async () => {
    const t = await tenantWithThread(0);
    const client = new Client({ name: "no-provider-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${http.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${t.key}` } },
      }),
    );
    try {
      const recalled = (await client.callTool({
        name: "recall",
        arguments: { dataset: "user-42", query: "Lisbon", include: ["synthesis"] },
      })) as CallToolResult;
      expect(recalled.isError).toBeFalsy();
      expect(recalled.structuredContent).toMatchObject({ factCount: 1, synthesis: null });
      const added = (await client.callTool({
        name: "add_messages",
        arguments: { threadId: t.threadId, messages: [{ role: "user", content: "I also like Porto." }] },
      })) as CallToolResult;
      expect(added.isError).toBeFalsy();
      expect(added.structuredContent).toMatchObject({ threadCreated: false, compacted: false });
    } finally {
      await client.close();
    }
  });
});

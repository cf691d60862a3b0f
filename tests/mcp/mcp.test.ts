import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { revokeApiKey } from "../../lib/api-keys";
import { threads } from "../../lib/db/schema";
import { runDueJobs } from "../../lib/jobs/runner";
import { echoSummary } from "../helpers/episodic-fixtures";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { fact } from "../helpers/semantic-fixtures";
import { createTestService, newTenant, serveOverHttp, type TestService } from "../helpers/service";

/**
 * The MCP server at /mcp on the Node.js host, driven by the official MCP TypeScript client over
 * real HTTP: the tools it lists, each tool against the real database (the episode and its facts
 * made by the real job path with the fake provider), tool errors for bad arguments and refused
 * calls, and the API key check.
 */
let svc: TestService;
let fake: FakeOpenAI;
let http: Awaited<ReturnType<typeof serveOverHttp>>;
let url: string;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  svc = await createTestService({ provider: fake, manualTime: true });
  http = await serveOverHttp(svc);
  url = http.url;
});
afterAll(async () => {
  await http?.close();
  await svc?.close();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.onStructured("episode_summary", echoSummary);
  fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
});

const clients: Client[] = [];
afterAll(async () => {
  for (const client of clients) await client.close();
});

async function connect(authorization?: string) {
  const client = new Client({ name: "mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: authorization ? { headers: { Authorization: authorization } } : {},
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function tenantClient(name: string) {
  const tenant = await newTenant(svc, name);
  return { ...tenant, client: await connect(`Bearer ${tenant.key}`) };
}

// biome-ignore lint/suspicious/noExplicitAny: tool results are checked field by field
type Json = any;

async function call(client: Client, name: string, args: Record<string, unknown>) {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const texts = result.content.map((c) => (c.type === "text" ? c.text : ""));
  return { result, texts, body: result.structuredContent as Json };
}

/** A call that must succeed; its structured result. */
async function ok(client: Client, name: string, args: Record<string, unknown>) {
  const answer = await call(client, name, args);
  expect(answer.result.isError, answer.texts.join("\n")).toBeFalsy();
  // Clients that read only text get the same result as JSON (after recall's block).
  expect(JSON.parse(answer.texts.at(-1) as string)).toEqual(answer.body);
  return answer.body;
}

/** A call that must fail as a tool error; the API's error body it carries. */
async function toolError(client: Client, name: string, args: Record<string, unknown>) {
  const answer = await call(client, name, args);
  expect(answer.result.isError, answer.texts.join("\n")).toBe(true);
  expect(JSON.parse(answer.texts[0])).toEqual(answer.body);
  return answer.body;
}

describe("MCP over HTTP on the Node.js host", () => {
  it("lists the six memory tools with descriptions and JSON Schemas of their arguments", async () => {
    const { client } = await tenantClient("mcp-list");
    expect(client.getServerVersion()?.name).toBe("memory-service");
    expect(client.getInstructions()).toMatch(/recall/);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      "add_messages",
      "recall",
      "search_facts",
      "list_episodes",
      "forget_fact",
      "end_thread",
    ]);
    for (const tool of tools) {
      expect(tool.description?.length, tool.name).toBeGreaterThan(80);
      expect(tool.inputSchema.type).toBe("object");
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const recall = byName.recall.inputSchema as Json;
    expect(recall.required).toEqual(["dataset"]);
    expect(recall.properties.dataset).toMatchObject({ type: "string", minLength: 1, maxLength: 256 });
    expect(recall.properties.query).toMatchObject({ type: "string", maxLength: 2000 });
    expect(recall.properties.limit).toMatchObject({ type: "integer", minimum: 1, maximum: 100 });
    expect(recall.properties.messageLimit).toMatchObject({ type: "integer", minimum: 1, maximum: 100 });
    expect(recall.properties.include).toMatchObject({ default: ["messages"] });
    expect(byName.add_messages.inputSchema.required).toEqual(["messages"]);
    expect(byName.recall.annotations?.readOnlyHint).toBe(true);
    expect(byName.forget_fact.annotations?.destructiveHint).toBe(true);
  });

  it("adds messages to a new thread and then to it, ends it, and recalls, searches and forgets what was learned", async () => {
    const { client } = await tenantClient("mcp-flow");
    const first = await ok(client, "add_messages", {
      dataset: "alice",
      messages: [
        { role: "user", content: "I moved to Lisbon last spring." },
        { role: "assistant", content: "Lisbon is lovely in spring!", model: "gpt-test" },
      ],
    });
    expect(first).toMatchObject({ dataset: "alice", threadCreated: true, compacted: false });
    expect(first.threadId).toMatch(/^thr_/);
    expect(first.messages.map((m: Json) => [m.role, m.sequenceNumber])).toEqual([
      ["user", 1],
      ["assistant", 2],
    ]);

    const second = await ok(client, "add_messages", {
      threadId: first.threadId,
      dataset: "alice",
      messages: [{ role: "user", content: "Any tips for learning Portuguese?" }],
    });
    expect(second).toMatchObject({ threadId: first.threadId, dataset: "alice", threadCreated: false });
    expect(second.messages[0].sequenceNumber).toBe(3);
    // The thread's dataset is taken from the thread when only its id is given.
    const third = await ok(client, "add_messages", {
      threadId: first.threadId,
      messages: [{ role: "assistant", content: "Start with Duolingo." }],
    });
    expect(third).toMatchObject({ dataset: "alice", threadCreated: false });
    expect(third.messages[0].sequenceNumber).toBe(4);

    fake.onStructured("fact_extraction", () => ({
      facts: [fact("lives_in", "Lisbon", "I moved to Lisbon last spring.")],
      entities: [{ name: "Lisbon", type: "PLACE" }],
    }));
    const ended = await ok(client, "end_thread", { threadId: first.threadId });
    expect(ended).toMatchObject({ threadId: first.threadId, dataset: "alice" });
    expect(ended.episodeId).toMatch(/^epi_/);
    await runDueJobs(svc.deps);

    const episodes = await ok(client, "list_episodes", { dataset: "alice" });
    expect(episodes).toMatchObject({ total: 1, hasMore: false });
    expect(episodes.episodes[0]).toMatchObject({ episodeId: ended.episodeId, status: "completed", messageCount: 4 });
    expect(episodes.episodes[0].summary).toContain("Lisbon");

    const recalled = await call(client, "recall", { dataset: "alice", query: "Where does the user live?" });
    expect(recalled.result.isError, recalled.texts.join("\n")).toBeFalsy();
    // The block first, as text a model reads as it is; then the whole result as JSON.
    expect(recalled.texts[0]).toBe(recalled.body.context);
    expect(recalled.body.context).toMatch(/# FACTS[\s\S]*Lisbon/);
    expect(recalled.body.factCount).toBe(1);
    expect(recalled.body.facts[0]).toMatchObject({ predicate: "lives_in", object: "Lisbon" });
    expect(recalled.body.episodes).toBeNull();
    // The conversation comes by default, without the message the fact already quotes.
    expect(recalled.body.messages.map((m: Json) => m.content)).toEqual(["Any tips for learning Portuguese?"]);
    expect(recalled.body.context).toMatch(/# CONVERSATION[\s\S]*user: Any tips for learning Portuguese\?/);
    const withEpisodes = await ok(client, "recall", { dataset: "alice", include: ["episodes"] });
    expect(withEpisodes.episodes.episodes[0].episodeId).toBe(ended.episodeId);
    expect(withEpisodes.messages).toBeNull();

    const found = await ok(client, "search_facts", { dataset: "alice", query: "Lisbon" });
    expect(found.factCount).toBe(1);
    const factId = found.facts[0].factId;
    expect(factId).toMatch(/^fct_/);
    expect(found.facts[0].sourceQuote).toBe("I moved to Lisbon last spring.");

    const forgotten = await ok(client, "forget_fact", { dataset: "alice", factId });
    expect(forgotten).toEqual({ factId, invalidatedAt: expect.any(String) });
    const after = await call(client, "recall", { dataset: "alice", query: "Where does the user live?", include: [] });
    expect(after.body).toMatchObject({ context: "", factCount: 0, facts: [], messages: null });
    expect(after.texts[0]).toMatch(/Nothing is known/);
    // Forgetting a fact takes the user's words that said it out of recall too; the rest stays.
    const words = await ok(client, "recall", { dataset: "alice", query: "Where does the user live?" });
    expect(words).toMatchObject({ factCount: 0, messages: [{ content: "Any tips for learning Portuguese?" }] });
    expect(await toolError(client, "forget_fact", { dataset: "alice", factId })).toEqual({ error: "Fact not found" });
  });

  it("answers bad arguments with a tool error carrying the API's validation body", async () => {
    const { client, projectId } = await tenantClient("mcp-bad");
    const issuesOf = async (name: string, args: Record<string, unknown>) => {
      const body = await toolError(client, name, args);
      expect(body.error).toBe("Validation error");
      return body.issues.map((i: Json) => i.path);
    };
    expect(await issuesOf("recall", {})).toEqual([["dataset"]]);
    expect(await issuesOf("recall", { dataset: "a", query: "q".repeat(2001) })).toEqual([["query"]]);
    expect(await issuesOf("recall", { dataset: "x".repeat(257) })).toEqual([["dataset"]]);
    expect(await issuesOf("recall", { dataset: "a", messageLimit: 101 })).toEqual([["messageLimit"]]);
    expect(await issuesOf("recall", { dataset: "a", limit: 0 })).toEqual([["limit"]]);
    expect(await issuesOf("recall", { dataset: "a", minConfidence: 2 })).toEqual([["minConfidence"]]);
    expect(await issuesOf("recall", { dataset: "a", asOf: "yesterday" })).toEqual([["asOf"]]);
    expect(await issuesOf("search_facts", { dataset: "a" })).toEqual([["query"]]);
    expect(await issuesOf("add_messages", { messages: [{ role: "user", content: "hi" }] })).toEqual([["dataset"]]);
    expect(await issuesOf("add_messages", { dataset: "a", messages: [] })).toEqual([["messages"]]);
    expect(
      await issuesOf("add_messages", {
        dataset: "a",
        messages: [
          { role: "user", content: "fine" },
          { role: "robot", content: "" },
        ],
      }),
    ).toEqual([
      ["messages", 1, "role"],
      ["messages", 1, "content"],
    ]);
    expect(await issuesOf("add_messages", { dataset: "a", messages: [{ role: "user", content: "a\u0000b" }] })).toEqual(
      [["messages", 0, "content"]],
    );
    expect(await issuesOf("list_episodes", { dataset: "a", limit: 51, status: "archived" })).toEqual([
      ["limit"],
      ["status"],
    ]);
    expect(await issuesOf("forget_fact", { dataset: "a" })).toEqual([["factId"]]);
    expect(await issuesOf("end_thread", { threadId: "" })).toEqual([["threadId"]]);
    // Nothing was written by any of them: no thread was created for a refused add_messages.
    expect(await svc.deps.db.$count(threads, eq(threads.projectId, projectId))).toBe(0);
  });

  it("answers refused calls with the API's message, and keeps every project to itself", async () => {
    const alice = await tenantClient("mcp-a");
    const mallory = await tenantClient("mcp-b");
    const { threadId } = await ok(alice.client, "add_messages", {
      dataset: "shared-name",
      messages: [{ role: "user", content: "My secret is 42." }],
    });
    const notFound = { error: "Thread not found" };
    expect(await toolError(alice.client, "end_thread", { threadId: "thr_unknown" })).toEqual(notFound);
    expect(
      await toolError(alice.client, "add_messages", {
        threadId: "thr_unknown",
        messages: [{ role: "user", content: "x" }],
      }),
    ).toEqual(notFound);
    const mismatch = await toolError(alice.client, "add_messages", {
      threadId,
      dataset: "other",
      messages: [{ role: "user", content: "x" }],
    });
    expect(mismatch).toMatchObject({ error: "Validation error", issues: [{ path: ["dataset"] }] });

    // Another project's key sees none of it, and cannot write to or end its thread.
    expect(
      await toolError(mallory.client, "add_messages", { threadId, messages: [{ role: "user", content: "x" }] }),
    ).toEqual(notFound);
    expect(await toolError(mallory.client, "end_thread", { threadId })).toEqual(notFound);
    expect(await ok(mallory.client, "recall", { dataset: "shared-name" })).toMatchObject({ factCount: 0 });

    // An unknown tool is a protocol error, as the MCP specification has it.
    await expect(alice.client.callTool({ name: "drop_database", arguments: {} })).rejects.toThrow(/Unknown tool/);
  });

  it("refuses a wrong, a revoked or a missing key with the spec's 401", async () => {
    const refused = async (authorization?: string) => {
      const error = await connect(authorization).then(
        () => null,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(StreamableHTTPError);
      expect((error as StreamableHTTPError).code).toBe(401);
      return (error as Error).message;
    };
    expect(await refused(`Bearer mem_${"0".repeat(64)}`)).toContain('{"error":"Invalid API key"}');
    expect(await refused("Basic abc")).toContain('{"error":"Missing or invalid Authorization header"}');
    expect(await refused()).toContain('{"error":"Missing or invalid Authorization header"}');

    // Revocation applies to the next request of a client already connected.
    const tenant = await tenantClient("mcp-revoked");
    await revokeApiKey(svc.deps, { apiKeyId: tenant.keyId });
    const error = await tenant.client.listTools().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(StreamableHTTPError);
    expect((error as StreamableHTTPError).code).toBe(401);
    expect((error as Error).message).toContain('{"error":"API key has been revoked"}');

    // The 401 body over plain HTTP, as for /v1.
    const raw = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: {
        authorization: "Bearer nope",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toEqual({ error: "Invalid API key" });
  });

  it("lets an MCP client in a browser on an allowed origin send its protocol header (CORS preflight)", async () => {
    const res = await fetch(`${url}/mcp`, {
      method: "OPTIONS",
      headers: {
        origin: "http://dashboard.test",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-protocol-version",
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("http://dashboard.test");
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("mcp-protocol-version");
  });

  it("takes one JSON-RPC message per request: a batch of several is refused before any of it runs", async () => {
    const { key } = await newTenant(svc, "mcp-batch");
    const post = (body: unknown) =>
      fetch(`${url}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          accept: "application/json, text/event-stream",
          "content-type": "application/json",
        },
        body: JSON.stringify(body),
      });
    const recall = (id: number) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "recall", arguments: { dataset: "ds", query: `question number ${id}` } },
    });
    const before = fake.embeddingCalls().length;
    const batch = await post(Array.from({ length: 100 }, (_, i) => recall(i + 1)));
    expect(batch.status).toBe(400);
    expect(await batch.json()).toEqual({
      jsonrpc: "2.0",
      error: { code: -32600, message: expect.stringMatching(/^Invalid Request: JSON-RPC batches are not accepted/) },
      id: null,
    });
    expect(fake.embeddingCalls().length).toBe(before);
    // One message, alone or as a batch of one, runs as before.
    for (const body of [recall(1), [recall(2)]]) {
      const res = await post(body);
      expect(res.status).toBe(200);
    }
    const invalid = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: "{not json",
    });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as Json).error.code).toBe(-32700);
  });

  it("is stateless (no session id; GET and DELETE 405 after the key check), holds the body limit and is not in /openapi.json", async () => {
    const { key } = await newTenant(svc, "mcp-http");
    const headers = { authorization: `Bearer ${key}`, accept: "application/json, text/event-stream" };
    const init = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "curl", version: "1" } },
      }),
    });
    expect(init.status).toBe(200);
    expect(init.headers.get("mcp-session-id")).toBeNull();
    expect(init.headers.get("content-type")).toMatch(/^application\/json/);
    expect(((await init.json()) as Json).result.serverInfo.name).toBe("memory-service");
    // `arguments` that is not an object: JSON-RPC's invalid params, not an internal error.
    for (const args of [null, "text", []]) {
      const call = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 3,
          method: "tools/call",
          params: { name: "recall", arguments: args },
        }),
      });
      expect(call.status).toBe(200);
      const answer = (await call.json()) as Json;
      expect({ args, code: answer.error?.code }).toEqual({ args, code: -32602 });
      expect(answer.error.message).toMatch(/^MCP error -32602: Invalid tools\/call request/);
    }
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${url}/mcp`, { method, headers });
      expect(res.status, method).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
      const anonymous = await fetch(`${url}/mcp`, { method });
      expect(anonymous.status, method).toBe(401);
    }
    // The API's 1 MB body limit holds here too (after the key check).
    const big = JSON.stringify({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: {
        name: "add_messages",
        arguments: { dataset: "a", messages: [{ role: "user", content: "x".repeat(1024 * 1024) }] },
      },
    });
    const tooLarge = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: big,
    });
    expect(tooLarge.status).toBe(413);
    expect(await tooLarge.json()).toEqual({ error: "Request body too large (limit 1 MB)" });
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => p.startsWith("/mcp"))).toEqual([]);
  });
});

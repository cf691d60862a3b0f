import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createApiKey } from "../../lib/api-keys";
import { rowsOf } from "../../lib/db/rows";
import { newId } from "../../lib/ids";
import { createProject } from "../../lib/projects";
import { useEdgeWorker } from "../helpers/edge-worker";

/**
 * The MCP server on the edge host: the built Worker under workerd (Miniflare), the Neon driver
 * over SQL-over-HTTP to a local endpoint on a fresh copy of the migrated template, and the
 * official MCP client speaking Streamable HTTP to the Worker's fetch handler.
 */
const edge = useEdgeWorker("mcp");

/** Every request of the client goes to the Worker's fetch handler. */
const toWorker: FetchLike = (url, init) =>
  edge.mf.dispatchFetch(String(url), init as never) as unknown as Promise<Response>;

async function connect(token: string) {
  const client = new Client({ name: "mcp-edge-test", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("http://localhost/mcp"), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
      fetch: toWorker,
    }),
  );
  return client;
}

// biome-ignore lint/suspicious/noExplicitAny: tool results are checked field by field
type Json = any;

async function callTool(client: Client, name: string, args: Record<string, unknown>) {
  const before = edge.sqlRequests.length;
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
  expect(result.isError, text).toBeFalsy();
  return { body: result.structuredContent as Json, roundTrips: edge.sqlRequests.length - before };
}

describe("MCP on the Worker (Neon over HTTP)", () => {
  it("lists the tools, adds messages to a new thread and recalls a fact, counting round trips", async () => {
    const project = await createProject(edge.deps, { name: "edge-mcp" });
    const { key } = await createApiKey({ deps: edge.deps, projectId: project.id }, { name: "edge-mcp-key" });
    const client = await connect(key);

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      "add_messages",
      "recall",
      "search_facts",
      "list_episodes",
      "forget_fact",
      "end_thread",
    ]);

    const added = await callTool(client, "add_messages", {
      dataset: "bob",
      messages: [
        { role: "user", content: "I am allergic to peanuts." },
        { role: "assistant", content: "Noted." },
      ],
    });
    expect(added.body).toMatchObject({ dataset: "bob", threadCreated: true, compacted: false });
    expect(added.body.messages.map((m: Json) => m.sequenceNumber)).toEqual([1, 2]);
    // The key, the new thread, the messages: one statement each.
    expect(added.roundTrips).toBe(3);
    const stored = rowsOf(
      await edge.database.db.execute(
        sql`SELECT role, content FROM messages WHERE thread_id = ${added.body.threadId} ORDER BY seq`,
      ),
    );
    expect(stored).toEqual([
      { role: "user", content: "I am allergic to peanuts." },
      { role: "assistant", content: "Noted." },
    ]);

    // A fact as extraction would have written it (extraction runs on the edge in tests/edge/jobs.test.ts).
    await edge.database.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at)
      VALUES (${newId("fct")}, ${project.id}, 'bob', 'user', 'is_allergic_to', 'peanuts', 0.9,
              'I am allergic to peanuts.', '2026-01-01T00:00:00Z')`);
    const recalled = await callTool(client, "recall", { dataset: "bob" });
    expect(recalled.body.context).toMatch(/# FACTS[\s\S]*peanuts/);
    expect(recalled.body.facts).toMatchObject([{ predicate: "is_allergic_to", object: "peanuts" }]);
    // The key, then one statement for the facts.
    expect(recalled.roundTrips).toBe(2);
    await client.close();
  });

  it("refuses a wrong key with the spec's 401", async () => {
    const error = await connect(`mem_${"f".repeat(64)}`).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(StreamableHTTPError);
    expect((error as StreamableHTTPError).code).toBe(401);
    expect((error as Error).message).toContain('{"error":"Invalid API key"}');
  });
});

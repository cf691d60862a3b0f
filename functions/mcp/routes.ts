import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { projectContext } from "../context";
import { requireApiKey } from "../middleware";
import { createRouter } from "../router";
import { createMemoryMcpServer } from "./server";

/**
 * `/mcp`: the Model Context Protocol over Streamable HTTP, for assistants (Claude Desktop, Cursor,
 * agents). Authenticated with an API key as /v1 is (the same check, run first by the app's
 * `authenticateFirst`: 401 `{error}` without a valid key) and scoped to the key's project.
 *
 * Stateless, so it runs the same on a Worker: a new server and transport per request, no session
 * id, each answer a JSON response. The app's 1 MB body limit applies as on /v1. Not a REST route,
 * so it is not in /openapi.json.
 */
export const mcpRoutes = createRouter();
mcpRoutes.use("*", requireApiKey);

/**
 * JSON-RPC messages one POST may carry. The SDK takes batches of up to 100, and each message can
 * be a tool call that pays a provider (recall's query embedding and synthesis, an episode's
 * summary and extraction after `end_thread`): behind a proxy that limits requests, one request
 * made a hundred times the work. MCP dropped batching (protocol 2025-06-18); a batch of one is
 * still one message.
 */
export const MCP_MESSAGES_PER_REQUEST = 1;

mcpRoutes.post("/", async (c) => {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    return jsonRpcError(400, -32700, "Parse error: Invalid JSON");
  }
  if (Array.isArray(body) && body.length > MCP_MESSAGES_PER_REQUEST) {
    return jsonRpcError(
      400,
      -32600,
      `Invalid Request: JSON-RPC batches are not accepted (${body.length} messages); send one message per request`,
    );
  }
  const server = createMemoryMcpServer(projectContext(c));
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  try {
    // With JSON responses the answer is complete when it resolves, so closing after it loses nothing.
    return await transport.handleRequest(c.req.raw, { parsedBody: body });
  } finally {
    await server.close();
  }
});

// Without sessions there is no stream to open (GET) and nothing to end (DELETE); a client takes
// the 405 as "this server does not offer that" and carries on over POST.
mcpRoutes.get("/", methodNotAllowed).delete("/", methodNotAllowed);

/** A JSON-RPC error as the SDK's transport answers one (no request id: the request was not read). */
function jsonRpcError(status: number, code: number, message: string) {
  return Response.json({ jsonrpc: "2.0", error: { code, message }, id: null }, { status });
}

function methodNotAllowed() {
  return Response.json(
    { error: "Method not allowed: this MCP server is stateless (POST only)" },
    {
      status: 405,
      headers: { Allow: "POST" },
    },
  );
}

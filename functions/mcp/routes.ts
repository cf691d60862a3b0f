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

mcpRoutes.post("/", async (c) => {
  const server = createMemoryMcpServer(projectContext(c));
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  try {
    // With JSON responses the answer is complete when it resolves, so closing after it loses nothing.
    return await transport.handleRequest(c.req.raw);
  } finally {
    await server.close();
  }
});

// Without sessions there is no stream to open (GET) and nothing to end (DELETE); a client takes
// the 405 as "this server does not offer that" and carries on over POST.
mcpRoutes.get("/", methodNotAllowed).delete("/", methodNotAllowed);

function methodNotAllowed() {
  return Response.json(
    { error: "Method not allowed: this MCP server is stateless (POST only)" },
    {
      status: 405,
      headers: { Allow: "POST" },
    },
  );
}

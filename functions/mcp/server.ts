import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import { z } from "zod";
import type { ProjectContext } from "../../lib/context";
import { errorFields } from "../../lib/log";
import { MEMORY_TOOLS } from "../../lib/mcp/tools";
import { version } from "../../package.json";
import { INTERNAL_ERROR } from "../errors";
import { toolFailure, toolSuccess } from "./results";

const INSTRUCTIONS =
  "Long-term memory about the user, kept per dataset (use one dataset per person, the same on every call). Before answering, call recall with the user's message as the query and treat the returned block as background knowledge. After each exchange, call add_messages with the user's message and your reply (keep the returned threadId for the rest of the conversation) and call end_thread when the conversation is over: facts are learned from stored conversations in the background. Use search_facts and forget_fact when the user asks what you remember or asks you to forget something.";

/** The tools as `tools/list` describes them; the JSON Schemas are the argument schemas' input side. */
let listed: Tool[] | undefined;
function toolList(): Tool[] {
  listed ??= MEMORY_TOOLS.map((tool) => ({
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: z.toJSONSchema(tool.input, { io: "input", target: "draft-2020-12" }) as Tool["inputSchema"],
    annotations: { title: tool.title, ...tool.annotations },
  }));
  return listed;
}

/**
 * The SDK validates elicitation answers with a JSON Schema validator, by default a new Ajv per
 * server (about a millisecond each, and a server is made per request). This server never elicits.
 */
const NO_ELICITATION: jsonSchemaValidator = {
  getValidator() {
    throw new Error("This server does not elicit input, so it validates no elicitation answers");
  },
};

/**
 * tools/call as the protocol layer parses it, `arguments` left unchecked: with the SDK's own schema
 * a non-object `arguments` failed that first parse and came back as an internal error (-32603)
 * carrying zod's dump. The Server's tools/call wrapper checks the strict schema next and answers
 * invalid params (-32602), as JSON-RPC has it for a malformed request.
 */
const CallToolRequestAnyArguments = CallToolRequestSchema.extend({
  params: CallToolRequestSchema.shape.params.extend({ arguments: z.unknown().optional() }),
});

/**
 * The memory service's MCP server for one request and one project (the API key's). It is the
 * SDK's low-level `Server` rather than `McpServer`: `McpServer` validates tool arguments itself
 * and answers its own message, while these tools answer bad arguments with the API's validation
 * body (`{error: 'Validation error', issues}`), as the /v1 routes do. An unknown tool name is a
 * protocol error (-32602), as the MCP specification has it.
 */
export function createMemoryMcpServer(ctx: ProjectContext): Server {
  const server = new Server(
    { name: "memory-service", title: "Memory service", version },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator: NO_ELICITATION },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolList() }));
  server.setRequestHandler(CallToolRequestAnyArguments, async (request) => {
    const tool = MEMORY_TOOLS.find((t) => t.name === request.params.name);
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    try {
      return toolSuccess(await tool.call(ctx, request.params.arguments));
    } catch (err) {
      const { result, unexpected } = toolFailure(err, tool.failure ?? INTERNAL_ERROR);
      if (unexpected) ctx.deps.log.error("mcp tool failed", { tool: tool.name, ...errorFields(err) });
      return result;
    }
  });
  return server;
}

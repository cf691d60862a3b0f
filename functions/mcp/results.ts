import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { ToolOutput } from "../../lib/mcp/tools";
import { knownFailure } from "../errors";

/**
 * A tool's answer: the result as structured content and as JSON text (clients that read only text
 * get the same), after the tool's own text when it has one (recall's block, which a model should
 * read as it is rather than as an escaped JSON string).
 */
export function toolSuccess(output: ToolOutput): CallToolResult {
  const json = JSON.stringify(output.result, null, 2);
  return {
    content: [
      ...(output.text === undefined ? [] : [{ type: "text" as const, text: output.text }]),
      { type: "text", text: json },
    ],
    structuredContent: output.result,
  };
}

/**
 * A failed call as the tool result the model sees (`isError`), carrying the body the matching /v1
 * route would answer, from the same mapping (`knownFailure`, functions/errors.ts): `{error:
 * 'Validation error', issues}` for bad arguments, `{error}` with the domain's message (`Thread not
 * found`, `Fact not found`) for a refused call, the route's 500 message with a `detail` for a
 * missing model provider, and the route's 500 message for anything else, which is the only case
 * to log (`unexpected`).
 */
export function toolFailure(err: unknown, failureMessage: string): { result: CallToolResult; unexpected: boolean } {
  const known = knownFailure(err, failureMessage);
  const body = known?.body ?? { error: failureMessage };
  return {
    result: { content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: body, isError: true },
    unexpected: known === undefined,
  };
}

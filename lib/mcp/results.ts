import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ZodError } from "zod";
import { HttpError } from "../errors";
import { NoProviderError } from "../llm/client";
import type { ToolOutput } from "./tools";

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
 * route would answer: `{error: 'Validation error', issues}` for bad arguments, `{error}` with the
 * domain's message (`Thread not found`, `Fact not found`) for a refused call or a missing model
 * provider (the /v1 route's 503 message), and the route's 500 message for anything else, which is
 * the only case to log (`unexpected`).
 */
export function toolFailure(err: unknown, failureMessage: string): { result: CallToolResult; unexpected: boolean } {
  const expected = err instanceof HttpError || err instanceof NoProviderError;
  const body =
    err instanceof ZodError
      ? { error: "Validation error", issues: err.issues }
      : { error: expected ? err.message : failureMessage };
  return {
    result: { content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: body, isError: true },
    unexpected: !(err instanceof ZodError || expected),
  };
}

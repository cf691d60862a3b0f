import { z } from "@hono/zod-openapi";
import { jsonResponse } from "./http";

export const ErrorSchema = z
  .object({
    error: z.string().openapi({ description: "What went wrong. Not stable: branch on the HTTP status." }),
    detail: z
      .string()
      .optional()
      .openapi({ description: "Why, where the service knows: e.g. that no model provider is configured." }),
  })
  .openapi("Error");

export const ValidationErrorSchema = z
  .object({
    error: z.literal("Validation error"),
    issues: z
      .array(
        z
          .object({
            code: z.string(),
            path: z.array(z.union([z.string(), z.number()])),
            message: z.string(),
          })
          .passthrough(),
      )
      .openapi({ description: "zod issues: code, path naming the field, message and code-specific details." }),
  })
  .openapi("ValidationError");

/**
 * The 400 of a route that takes a body: a field that fails validation (`issues` names it), or a
 * body that cannot be read at all (not JSON, bytes not in the charset its Content-Type names):
 * then `error` alone.
 */
export const BadRequestSchema = z.union([ValidationErrorSchema, ErrorSchema]).openapi("BadRequest");

export const errorResponses = {
  400: jsonResponse(ValidationErrorSchema, "Validation failed"),
  401: jsonResponse(ErrorSchema, "Missing, invalid or revoked credential"),
  404: jsonResponse(ErrorSchema, "Not found, or not in the caller's project"),
} as const;

/** What a route needing a model adds to its 500's description. */
export const NO_PROVIDER_NOTE =
  "; also with no model provider configured (neither OPENAI_API_KEY nor OPENAI_BASE_URL set), `detail` then saying which variables to set";

/**
 * The `error` a route's unexpected failures answer with, kept on its declared 500 response under a
 * symbol key: JSON has no symbol keys, so the OpenAPI document shows the description alone.
 */
export const FAILURE_MESSAGE = Symbol("failureMessage");

/** A route's 500: `message` is the body's `error`, `description` what the document says of it. */
export const failureResponse = (message: string, description = message) => ({
  ...jsonResponse(ErrorSchema, description),
  [FAILURE_MESSAGE]: message,
});

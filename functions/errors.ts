import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ZodError } from "zod";
import { httpErrorOf, NoProviderError, ProviderError } from "../lib/errors";
import { consoleLogger, errorFields } from "../lib/log";
import type { AppEnv } from "./env";
import { declaredFailure } from "./failures";

/**
 * The body of an error answer: `{error}`, or the validation shape with zod's issues; `detail` says
 * why where the service knows it (no model provider configured).
 */
export type ErrorBody = { error: string; issues?: unknown[]; detail?: string };

/** The 500 message of a route (or MCP tool) that declares none of its own. */
export const INTERNAL_ERROR = "Internal server error";

/**
 * The one mapping from an error to the API's answer, for HTTP (`onError`) and MCP (a tool's
 * result, functions/mcp/results.ts): the status and body of an expected failure, or undefined for
 * an unexpected one, which the caller logs and answers with its 500 message.
 */
export function knownFailure(
  err: unknown,
  /** The route's (or tool's) 500 message, for the failures answered with it. */
  failureMessage = INTERNAL_ERROR,
): { status: ContentfulStatusCode; body: ErrorBody; headers?: Record<string, string> } | undefined {
  if (err instanceof ZodError) return { status: 400, body: { error: "Validation error", issues: err.issues } };
  const refusal = httpErrorOf(err);
  if (refusal) return { status: refusal.status, body: { error: refusal.message }, headers: refusal.headers };
  if (err instanceof NoProviderError) {
    // Every route that needs a model: its own 500, as the spec and the run contract say ("500 on
    // chat"), and in `detail` which variables to set. A route that can do without a model
    // (recall) catches it and degrades instead.
    return { status: 500, body: { error: failureMessage, detail: err.message } };
  }
  if (isUnstorableText(err)) {
    // A safety net behind the schemas' own checks: text Postgres cannot store (a NUL character).
    return {
      status: 400,
      body: {
        error: "Validation error",
        issues: [{ code: "custom", path: [], message: "Text must not contain NUL characters (\\u0000)" }],
      },
    };
  }
  if (err instanceof HTTPException && err.status < 500) {
    // Hono's own: malformed JSON from the validator (400), body limit (413).
    const message = /malformed json/i.test(err.message)
      ? "Malformed JSON in request body"
      : err.message || "Bad request";
    return { status: err.status as ContentfulStatusCode, body: { error: message } };
  }
  return undefined;
}

/**
 * A request refused for its input, not for what it asked of the data: the validation error (the
 * schemas', or text the database cannot store, which wrote nothing), malformed JSON, a wrong
 * content type. An `Idempotency-Key` is not spent on one (functions/idempotency.ts), so the
 * corrected request runs under the same key.
 */
export function refusedInput(err: unknown): boolean {
  return err instanceof ZodError || isUnstorableText(err) || (err instanceof HTTPException && err.status < 500);
}

/** The only place errors become HTTP responses. */
export function onError(err: Error, c: Context<AppEnv>) {
  const known = knownFailure(err, failureMessage(c));
  if (known && refusedInput(err)) c.set("inputRefused", true);
  if (known) return c.json(known.body, known.status, known.headers);
  const log = c.get("deps")?.log ?? consoleLogger;
  const where = { method: c.req.method, path: c.req.path, ...errorFields(err) };
  // The provider failing (chat's documented 500) is the provider's trouble, not a bug here.
  if (err instanceof ProviderError) log.warn("request failed: the model call failed", where);
  else log.error("unhandled error", where);
  return c.json({ error: failureMessage(c) }, 500);
}

/**
 * Postgres rejects U+0000 in text (22021, invalid byte sequence) and in jsonb (22P05, unsupported
 * Unicode escape). Drivers wrap the database error, so the cause chain is searched.
 */
function isUnstorableText(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === "22021" || code === "22P05") return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The spec names the 500 message of some routes: each declares it with its 500 response
 * (`failureResponse`, functions/schemas/errors.ts); the rest say INTERNAL_ERROR.
 */
export function failureMessage(c: Context<AppEnv>): string {
  return declaredFailure(c) ?? INTERNAL_ERROR;
}

export function notFoundRoute(c: Context<AppEnv>) {
  return c.json({ error: "Not found" }, 404);
}

import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { ZodError } from "zod";
import { httpErrorOf } from "../lib/errors";
import { NoProviderError } from "../lib/llm/client";
import { consoleLogger, errorFields } from "../lib/log";
import type { AppEnv } from "./env";
import { declaredFailure } from "./failures";

/** The only place errors become HTTP responses. */
export function onError(err: Error, c: Context<AppEnv>) {
  if (err instanceof ZodError) {
    return c.json({ error: "Validation error", issues: err.issues }, 400);
  }
  const refusal = httpErrorOf(err);
  if (refusal) {
    return c.json({ error: refusal.message }, refusal.status);
  }
  if (err instanceof NoProviderError) {
    // Every route that needs a model, the same answer: the service is up, a dependency is not
    // configured. A route that can do without one (recall) catches it and degrades instead.
    return c.json({ error: err.message }, 503);
  }
  if (isUnstorableText(err)) {
    // A safety net behind the schemas' own checks: text Postgres cannot store (a NUL character).
    return c.json(
      {
        error: "Validation error",
        issues: [{ code: "custom", path: [], message: "Text must not contain NUL characters (\\u0000)" }],
      },
      400,
    );
  }
  if (err instanceof HTTPException) {
    // Hono's own: malformed JSON from the validator (400), body limit (413).
    const status = err.status;
    if (status < 500) {
      const message = /malformed json/i.test(err.message)
        ? "Malformed JSON in request body"
        : err.message || "Bad request";
      return c.json({ error: message }, status);
    }
  }
  const log = c.get("deps")?.log ?? consoleLogger;
  log.error("unhandled error", { method: c.req.method, path: c.req.path, ...errorFields(err) });
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
 * (`failureResponse`, functions/schemas/errors.ts); the rest say "Internal server error".
 */
function failureMessage(c: Context<AppEnv>): string {
  return declaredFailure(c) ?? "Internal server error";
}

export function notFoundRoute(c: Context<AppEnv>) {
  return c.json({ error: "Not found" }, 404);
}

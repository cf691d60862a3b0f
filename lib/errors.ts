import { DrizzleQueryError } from "drizzle-orm";

/**
 * The one error type the domain throws. `onError` in functions/app.ts maps it to `{error}` with
 * its status; anything else becomes a logged 500.
 */
export class HttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 409 | 413 | 415 | 500,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/**
 * The HttpError behind `err`, if any: one thrown while a statement ran (a read's API key refused
 * in the statement's own round trip, lib/auth.ts) reaches the caller wrapped by the driver.
 */
export function httpErrorOf(err: unknown): HttpError | undefined {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    if (e instanceof HttpError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A refused request is not a part that failed: rethrown where a failure would be degraded. */
export function rethrowRefusal(err: unknown): void {
  const refusal = httpErrorOf(err);
  if (refusal) throw refusal;
}

export const badRequest = (message: string) => new HttpError(400, message);
export const unauthorized = (message: string) => new HttpError(401, message);
export const notFound = (message: string) => new HttpError(404, message);
export const conflict = (message: string) => new HttpError(409, message);

/**
 * A failure as one readable line, for a stored `error` (an episode's, an extraction's). A database
 * error is the database's own message: the driver's wrapper would carry the whole statement and
 * its parameters (the summary, the user's words, a vector of a thousand numbers).
 */
export function failureText(err: unknown): string {
  if (err instanceof DrizzleQueryError && err.cause instanceof Error) return `Database error: ${err.cause.message}`;
  return err instanceof Error ? err.message : String(err);
}

/**
 * Raised for every provider failure, with a message fit for an episode's `error` (lib/llm/client.ts
 * raises it). Here rather than beside the client: the logger tells it from a bug (lib/log.ts), and
 * the client logs, so declaring it there would make the two folders import each other.
 */
export class ProviderError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ProviderError";
  }
}

import { DrizzleQueryError } from "drizzle-orm";

/**
 * The domain's errors. A refusal is an HttpError; a model provider's failure a ProviderError. Both
 * become an answer in one place, `knownFailure` in functions/errors.ts (HTTP and MCP alike):
 * `{error}` with the refusal's status, the route's 500 with a `detail` for a missing provider;
 * anything else a logged 500.
 */
export class HttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 409 | 413 | 415 | 429 | 500,
    message: string,
    /** Headers the answer carries (a 429's `Retry-After`). */
    readonly headers?: Record<string, string>,
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
  // Never the query builder's own message: it lists the statement's parameters (the request's data).
  if (err instanceof DrizzleQueryError) {
    return `Database error: ${err.cause instanceof Error ? err.cause.message : "the statement failed"}`;
  }
  if (err instanceof Error) return err.message;
  const errno = (err as { errno?: unknown } | null)?.errno;
  if (typeof errno === "number") return fileSystemErrorText(errno);
  return String(err);
}

/**
 * The embedded database's file system throws plain objects (`{name: "ErrnoError", errno}`), with
 * Emscripten's numbers, not the host's: String() of one was "[object Object]".
 */
const EMSCRIPTEN_ERRNO: Record<number, string> = {
  2: "permission denied (EACCES)",
  20: "file exists (EEXIST)",
  31: "is a directory (EISDIR)",
  44: "no such file or directory (ENOENT)",
  51: "no space left on device (ENOSPC)",
  54: "not a directory (ENOTDIR)",
  63: "operation not permitted (EPERM)",
  69: "read-only file system (EROFS)",
};

function fileSystemErrorText(errno: number): string {
  return `file system error: ${EMSCRIPTEN_ERRNO[errno] ?? `errno ${errno}`}`;
}

/** Raised for every provider failure, with a message fit for an episode's `error`. */
export class ProviderError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ProviderError";
  }
}

/** What a call without a configured provider fails with (and the 500 of every route needing a model says in `detail`). */
export const NO_PROVIDER_MESSAGE =
  "No model provider is configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server";

/**
 * The provider is not configured at all (neither OPENAI_API_KEY nor OPENAI_BASE_URL). A route
 * that needs the model lets it through: functions/errors.ts answers it with the route's 500. Not an
 * HttpError, so the parts that degrade without a model (recall) still catch it.
 */
export class NoProviderError extends ProviderError {
  constructor() {
    super(NO_PROVIDER_MESSAGE);
    this.name = "NoProviderError";
  }
}

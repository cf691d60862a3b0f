import type { components } from "./schema.js";

/** One issue of a `400 Validation error` body: which field (`path`) and what is wrong with it. */
export interface ValidationIssue {
  code?: string;
  path: (string | number)[];
  message: string;
  [detail: string]: unknown;
}

/** The service's error body (`{error}`, plus `issues` on a validation error). */
export interface ErrorBody {
  error: string;
  issues?: ValidationIssue[];
}

/** Every error this client throws extends this, so one `instanceof` catches them all. */
export class MemoryError extends Error {
  override name = "MemoryError";
  /**
   * A write sent with an `Idempotency-Key` (the automatic one, or yours) that failed: the key it
   * and its retries were sent with. Pass it as the call's `idempotencyKey` to resume the write: if
   * the service did it, the repeat gets the stored answer (a 409 while it still runs); if not, it
   * runs once.
   */
  declare idempotencyKey?: string;
}

/**
 * The service answered with an error status. `message` is the service's own (`error` in the
 * body); `issues` name the offending fields of a 400. Messages are not stable: branch on `status`.
 */
export class MemoryApiError extends MemoryError {
  override name = "MemoryApiError";
  readonly issues: ValidationIssue[];

  constructor(
    readonly status: number,
    readonly body: ErrorBody,
    /** The wait the service asked for (Retry-After), in milliseconds, when it sent one. */
    readonly retryAfterMs?: number,
    /** Method and path of the failed call, for logs. */
    readonly request?: string,
  ) {
    super(body.error);
    this.issues = body.issues ?? [];
  }
}

/**
 * The request never got a usable answer: connection refused or reset, DNS, TLS, a body cut short,
 * or a 2xx whose body is not JSON (a proxy's page; the message says "the answer is not JSON").
 * Retried like a lost answer: a write under its key then gets the service's stored answer.
 */
export class MemoryNetworkError extends MemoryError {
  override name = "MemoryNetworkError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * An attempt took longer than `timeoutMs` and was abandoned; for `chatStream`, also a stream that
 * sent nothing for `timeoutMs` ("stalled").
 */
export class MemoryTimeoutError extends MemoryError {
  override name = "MemoryTimeoutError";
  constructor(
    readonly timeoutMs: number,
    message = `The memory service did not answer within ${timeoutMs} ms`,
  ) {
    super(message);
  }
}

/** A call the client refused to send: its input is wrong in a way the service would reject (400). */
export class MemoryValidationError extends MemoryError {
  override name = "MemoryValidationError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

type Episode = components["schemas"]["Episode"];

/** `episodes.waitFor`: the episode ended `failed` (its `error` says why), `archived` or `deleted`, so it will not complete. */
export class MemoryEpisodeFailedError extends MemoryError {
  override name = "MemoryEpisodeFailedError";
  constructor(readonly episode: Episode) {
    super(`Episode ${episode.episodeId} is ${episode.status}${episode.error ? `: ${episode.error}` : ""}`);
  }
}

/**
 * `episodes.waitFor`: the episode was not done within `timeoutMs`; `episode` is how it was last
 * seen, `lastError` what the last read failed with when it failed (the service down or hung).
 */
export class MemoryWaitTimeoutError extends MemoryError {
  override name = "MemoryWaitTimeoutError";
  constructor(
    readonly timeoutMs: number,
    readonly episode: Episode | undefined,
    readonly lastError?: MemoryError,
  ) {
    super(
      `The episode was not done within ${timeoutMs} ms${episode ? ` (last seen: ${episode.status})` : ""}${
        lastError ? `; last error: ${lastError.message}` : ""
      }`,
    );
  }
}

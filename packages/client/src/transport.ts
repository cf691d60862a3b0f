import {
  type ErrorBody,
  MemoryApiError,
  type MemoryError,
  MemoryNetworkError,
  MemoryTimeoutError,
  MemoryValidationError,
} from "./errors.js";
import {
  backoffMs,
  type Failure,
  isRetryable,
  parseRetryAfter,
  type Repeatability,
  type RetryPolicy,
} from "./retry.js";

/** Per-call options; each overrides the client's own setting for this call only. */
export interface CallOptions {
  /** Cancels the call, its retries and the waits between them; the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** How long one attempt may take, in ms (0: no limit). A retry gets a fresh budget. */
  timeoutMs?: number;
  /**
   * Attempts after the first. A keyed write answered 409 (its first request still running) keeps
   * asking without using them up, until `(retries + 1) × timeoutMs` after the call started.
   */
  retries?: number;
  /**
   * Writes only: the `Idempotency-Key` to send. Default: a new random key per call, the same for
   * its retries. `false` sends none, and the write is then never retried. A key the service would
   * refuse (empty, blank, over 255 characters, not printable ASCII, a comma outside quotes) is
   * refused before sending with a `MemoryValidationError`.
   */
  idempotencyKey?: string | false;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/** A retry about to happen: for logs and metrics. */
export interface RetryEvent {
  request: string;
  /** 1 for the first retry (a keyed write's wait after a 409 counts here, not against `retries`). */
  retry: number;
  delayMs: number;
  error: MemoryError;
}

export interface TransportConfig {
  timeoutMs: number;
  retry: RetryPolicy;
  /** Whether writes get an automatic Idempotency-Key (default true). */
  idempotencyKeys: boolean;
  onRetry?: (event: RetryEvent) => void;
}

/**
 * How a call may be repeated: a read, a write, a write whose 5xx may have written part of it
 * (chat), or a streamed write (chat's stream): repeated as chat is, under its key, but only until
 * its response's headers arrive (`perform` returns then); a stream broken after that is not.
 */
export type CallKind = "read" | "write" | "write-no-5xx" | "stream";

export type Attempt<D> = (init: {
  signal: AbortSignal;
  headers: Record<string, string>;
}) => Promise<{ data?: D; error?: unknown; response: Response }>;

const TIMEOUT = Symbol("timeout");

/**
 * One API call: attempts until one succeeds, an error is not retryable, the retries run out or
 * the caller aborts. `label` ("POST /v1/threads") goes into errors and retry events.
 */
export async function perform<D>(
  config: TransportConfig,
  label: string,
  kind: CallKind,
  options: CallOptions | undefined,
  attempt: Attempt<D>,
): Promise<D> {
  const headers: Record<string, string> = { ...options?.headers };
  const repeatability = idempotency(config, kind, options, headers);
  const retries = options?.retries ?? config.retry.retries;
  const timeoutMs = options?.timeoutMs ?? config.timeoutMs;
  const signal = options?.signal;
  const keyed = repeatability === "keyed" || repeatability === "keyed-no-5xx";
  // How long a keyed write may wait for its own first attempt (409s), from the call's start.
  const deadline = timeoutMs > 0 ? Date.now() + (retries + 1) * timeoutMs : Number.POSITIVE_INFINITY;
  let n = 0;
  for (let repeat = 1; ; repeat++) {
    signal?.throwIfAborted();
    const outcome = await once(attempt, headers, timeoutMs, signal, label);
    if (outcome.ok) return outcome.data;
    const { error, failure } = outcome;
    // The write's key, to resume it with: a repeat under it gets the stored answer, never a second write.
    if (keyed) error.idempotencyKey = headers["Idempotency-Key"];
    let delayMs: number | undefined;
    if (keyed && failure.kind === "status" && failure.status === 409) {
      // The first request with this key still runs (an attempt that timed out, or the caller's own):
      // wait as asked (default 1 s) and ask again for as long as the call's budget lasts, not
      // counted as retries; once it has ended, the answer is its stored one.
      const left = deadline - Date.now();
      if (left <= 0) throw error;
      delayMs = Math.min(Math.max(failure.retryAfterMs ?? STILL_RUNNING_WAIT_MS, MIN_STILL_RUNNING_WAIT_MS), left);
    } else {
      if (n >= retries || !isRetryable(failure, repeatability)) throw error;
      delayMs = backoffMs(n, config.retry, failure.kind === "status" ? failure.retryAfterMs : undefined);
      if (delayMs === undefined) throw error;
      n++;
    }
    config.onRetry?.({ request: label, retry: repeat, delayMs, error });
    await sleep(delayMs, signal);
  }
}

/** The wait before asking again after a 409 "still being processed" that sent no Retry-After. */
const STILL_RUNNING_WAIT_MS = 1000;
/** The shortest such wait (a `Retry-After: 0` does not make a busy loop). */
const MIN_STILL_RUNNING_WAIT_MS = 100;

/** Sets the Idempotency-Key header of a write and says how the call may be repeated. */
function idempotency(
  config: TransportConfig,
  kind: CallKind,
  options: CallOptions | undefined,
  headers: Record<string, string>,
): Repeatability {
  if (kind === "read") return "safe";
  const key = callKey(config, options);
  if (key === false) return "unsafe";
  const problem = keyProblem(key);
  if (problem) throw new MemoryValidationError("idempotencyKey", problem);
  headers["Idempotency-Key"] = key;
  // A streamed chat is repeated as the JSON one: the service holds its key while it streams (409)
  // and then keeps its events, so a repeat gets them rather than storing the turn again.
  return kind === "write" ? "keyed" : "keyed-no-5xx";
}

/** The key a write is sent with: the call's own, else a new one when the client sends keys, else none (`false`). */
export function callKey(config: Pick<TransportConfig, "idempotencyKeys">, options?: CallOptions): string | false {
  return options?.idempotencyKey ?? (config.idempotencyKeys ? newIdempotencyKey() : false);
}

/** A key sent as a Structured Field string (`"8e03…"`), which the service unquotes. */
const QUOTED_KEY = /^"(?:[^"\\]|\\["\\])*"$/;

/**
 * Why the service would refuse `key` as an `Idempotency-Key` (a 400), or undefined (lib/idempotency.ts):
 * it takes 1-255 printable ASCII characters once HTTP has trimmed the spaces around the value and a
 * quoted one is unquoted; a bare value with a comma is two keys joined (the header sent twice).
 */
function keyProblem(key: unknown): string | undefined {
  if (typeof key !== "string") return "must be a string, or false to send none";
  if (key === "") return "must not be empty (pass false to send none)";
  if (!/^[\x20-\x7e]*$/.test(key)) return "must be printable ASCII characters (0x20-0x7E)";
  let sent = key.replace(/^ +| +$/g, "");
  if (QUOTED_KEY.test(sent)) sent = sent.slice(1, -1).replace(/\\(["\\])/g, "$1");
  else if (sent.includes(",")) return "must not contain a comma outside quotes (HTTP reads it as two keys)";
  if (sent === "") return "must not be blank (HTTP trims the spaces around a header value)";
  if (sent.length > 255) return "must be at most 255 characters";
  return undefined;
}

type Outcome<D> = { ok: true; data: D } | { ok: false; error: MemoryError; failure: Failure };

async function once<D>(
  attempt: Attempt<D>,
  headers: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  label: string,
): Promise<Outcome<D>> {
  const controller = new AbortController();
  const timer = timeoutMs > 0 ? setTimeout(() => controller.abort(TIMEOUT), timeoutMs) : undefined;
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const { data, error, response } = await attempt({ signal: controller.signal, headers });
    if (response.ok) return { ok: true, data: data as D };
    const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
    const body = errorBody(error, response);
    return {
      ok: false,
      error: new MemoryApiError(response.status, body, retryAfterMs, label),
      failure: { kind: "status", status: response.status, retryAfterMs },
    };
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (controller.signal.reason === TIMEOUT) {
      return { ok: false, error: new MemoryTimeoutError(timeoutMs), failure: { kind: "timeout" } };
    }
    // undici says "fetch failed" and puts the reason (ECONNREFUSED, a reset) in its cause. A
    // SyntaxError is a 2xx whose body is not JSON (a proxy's page): no usable answer either.
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : "";
    const reason =
      err instanceof SyntaxError
        ? `the answer is not JSON (${err.message})`
        : err instanceof Error
          ? `${err.message}${cause}`
          : String(err);
    return {
      ok: false,
      error: new MemoryNetworkError(`${label}: ${reason}`, { cause: err }),
      failure: { kind: "network" },
    };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/** The spec's `{error, issues?}`, or a stand-in when something other than the service answered (a proxy's page). */
export function errorBody(parsed: unknown, response: Response): ErrorBody {
  if (parsed && typeof parsed === "object" && typeof (parsed as ErrorBody).error === "string") {
    return parsed as ErrorBody;
  }
  const text = typeof parsed === "string" ? parsed.trim().slice(0, 200) : "";
  return { error: text || `${response.status} ${response.statusText}`.trim() };
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A random key (a UUID where the runtime has one: Node, Workers, Deno, browsers in secure contexts). */
export function newIdempotencyKey(): string {
  if (typeof globalThis.crypto?.randomUUID === "function") return globalThis.crypto.randomUUID();
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

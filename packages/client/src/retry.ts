/**
 * When to try a call again, and after how long: pure decisions (tested in retry.test.ts), the
 * loop that acts on them is in transport.ts.
 */

export interface RetryPolicy {
  /** Attempts after the first (default 2). 0 turns retrying off. */
  retries: number;
  /** The first backoff's ceiling in ms (default 250); each retry doubles it. */
  baseDelayMs: number;
  /** No backoff is longer than this, and a Retry-After longer than this is not waited for (default 10 s). */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { retries: 2, baseDelayMs: 250, maxDelayMs: 10_000 };

/**
 * How a call may be repeated:
 * - "safe": reads (GET, recall, prepare): always;
 * - "keyed": a write sent with an Idempotency-Key: a repeat is answered from the first answer;
 * - "keyed-no-5xx": a keyed write whose 5xx has already written part of its work (chat stores the
 *   user message before the model call; a 5xx frees the key, so a retry would store it again);
 * - "unsafe": a write without a key: never repeated.
 */
export type Repeatability = "safe" | "keyed" | "keyed-no-5xx" | "unsafe";

/** What went wrong with an attempt, as far as retrying is concerned. */
export type Failure =
  | { kind: "status"; status: number; retryAfterMs?: number }
  | { kind: "network" }
  | { kind: "timeout" };

/** Whether a failed attempt may be repeated (the attempt count is checked by the caller). */
export function isRetryable(failure: Failure, repeatability: Repeatability): boolean {
  if (repeatability === "unsafe") return false;
  if (failure.kind !== "status") return true;
  const { status } = failure;
  if (status === 429) return true;
  // 409 on /v1 is "a request with this Idempotency-Key is still being processed; retry later".
  if (status === 409) return repeatability !== "safe";
  if (status >= 500) return repeatability !== "keyed-no-5xx" && status !== 501;
  return false;
}

/**
 * The wait before retry number `retry` (0 for the first): "full jitter" exponential backoff, a
 * uniform draw in [0, min(maxDelayMs, baseDelayMs × 2^retry)), so clients that failed together do
 * not come back together. A Retry-After is a floor; `undefined` when it is longer than
 * `maxDelayMs` (the caller gives up and reports it rather than sleeping that long).
 */
export function backoffMs(
  retry: number,
  policy: RetryPolicy,
  retryAfterMs?: number,
  random: () => number = Math.random,
): number | undefined {
  if (retryAfterMs !== undefined && retryAfterMs > policy.maxDelayMs) return undefined;
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  const jittered = Math.floor(random() * ceiling);
  return Math.max(jittered, retryAfterMs ?? 0);
}

/** Retry-After as milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

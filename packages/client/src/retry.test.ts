import { describe, expect, it } from "vitest";
import { backoffMs, DEFAULT_RETRY, isRetryable, parseRetryAfter } from "./retry";

describe("isRetryable", () => {
  it("reads are retried on 429, 5xx, network errors and timeouts, never on other 4xx", () => {
    for (const status of [429, 500, 502, 503, 504]) expect(isRetryable({ kind: "status", status }, "safe")).toBe(true);
    for (const status of [400, 401, 404, 409, 413, 422, 501]) {
      expect(isRetryable({ kind: "status", status }, "safe")).toBe(false);
    }
    expect(isRetryable({ kind: "network" }, "safe")).toBe(true);
    expect(isRetryable({ kind: "timeout" }, "safe")).toBe(true);
  });

  it("a write without a key is never retried, whatever happened", () => {
    for (const failure of [{ kind: "network" }, { kind: "timeout" }, { kind: "status", status: 503 }] as const) {
      expect(isRetryable(failure, "unsafe")).toBe(false);
    }
  });

  it("a keyed write is retried like a read, and on a 409 (its first attempt still running)", () => {
    expect(isRetryable({ kind: "status", status: 503 }, "keyed")).toBe(true);
    expect(isRetryable({ kind: "status", status: 409 }, "keyed")).toBe(true);
    expect(isRetryable({ kind: "status", status: 422 }, "keyed")).toBe(false);
  });

  it("a keyed write whose 5xx has written part of it (chat) is not retried on a 5xx", () => {
    expect(isRetryable({ kind: "status", status: 500 }, "keyed-no-5xx")).toBe(false);
    expect(isRetryable({ kind: "status", status: 429 }, "keyed-no-5xx")).toBe(true);
    expect(isRetryable({ kind: "network" }, "keyed-no-5xx")).toBe(true);
  });
});

describe("backoffMs", () => {
  it("draws uniformly below a ceiling that doubles per retry up to maxDelayMs", () => {
    const policy = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1000 };
    expect(backoffMs(0, policy, undefined, () => 0.999)).toBe(99);
    expect(backoffMs(2, policy, undefined, () => 0.5)).toBe(200);
    expect(backoffMs(10, policy, undefined, () => 0.999)).toBe(999);
    expect(backoffMs(3, policy, undefined, () => 0)).toBe(0);
  });

  it("waits at least the Retry-After, and not at all past maxDelayMs", () => {
    const policy = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 5000 };
    expect(backoffMs(0, policy, 2000, () => 0.5)).toBe(2000);
    expect(backoffMs(0, policy, 5001, () => 0.5)).toBeUndefined();
  });
});

describe("parseRetryAfter", () => {
  it("reads delay-seconds and HTTP dates", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("3", now)).toBe(3000);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:10 GMT", now)).toBe(10_000);
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:59:00 GMT", now)).toBe(0);
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter("soon", now)).toBeUndefined();
  });
});

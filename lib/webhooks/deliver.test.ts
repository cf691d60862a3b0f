import { describe, expect, it } from "vitest";
import { attemptOutcome, DISABLE_AFTER_MS } from "./deliver";

const done = new Date("2026-01-02T00:00:00Z");
const retryUntil = new Date("2026-01-03T00:00:00Z");

describe("attemptOutcome", () => {
  it("a success: no next attempt", () => {
    const out = attemptOutcome({ statusCode: 204, error: null, durationMs: 5 }, 3, done, retryUntil);
    expect(out.ok).toBe(true);
    expect(out.next).toBeNull();
    expect(out.at).toBe(done.toISOString());
    expect(out.disableBefore).toBe(new Date(done.getTime() - DISABLE_AFTER_MS).toISOString());
  });

  it("a failure: the backoff of the attempt it was, and the reason that would disable the endpoint", () => {
    const first = attemptOutcome({ statusCode: 500, error: "HTTP 500", durationMs: 5 }, 0, done, retryUntil);
    expect(first.ok).toBe(false);
    expect(first.next?.getTime()).toBe(done.getTime() + 30_000);
    const third = attemptOutcome({ statusCode: 500, error: "HTTP 500", durationMs: 5 }, 2, done, retryUntil);
    expect(third.next?.getTime()).toBe(done.getTime() + 120_000);
    expect(third.reason).toBe("Every attempt failed for a day; the last: HTTP 500");
  });

  it("a failure once the retry window is over: no next attempt; a long error is cut to 500 characters", () => {
    const out = attemptOutcome({ statusCode: null, error: "x".repeat(900), durationMs: 5 }, 9, retryUntil, retryUntil);
    expect(out.next).toBeNull();
    expect(out.reason).toHaveLength(500);
  });
});

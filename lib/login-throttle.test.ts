import { describe, expect, it } from "vitest";
import { loginRetryAfterMs, loginWaitMs, MAX_LOGIN_WAIT_MS } from "./login-throttle";

describe("loginWaitMs", () => {
  it("is free for five failures, then 1 s doubling, capped at 15 minutes", () => {
    expect([0, 4, 5, 6, 7].map(loginWaitMs)).toEqual([0, 0, 1000, 2000, 4000]);
    expect(loginWaitMs(14)).toBe(512_000);
    expect(loginWaitMs(15)).toBe(MAX_LOGIN_WAIT_MS);
    expect(loginWaitMs(1_000_000)).toBe(MAX_LOGIN_WAIT_MS);
  });
});

describe("loginRetryAfterMs", () => {
  const last = new Date("2026-12-01T10:00:00Z");
  const at = (ms: number) => new Date(last.getTime() + ms);

  it("counts from the last failure", () => {
    expect(loginRetryAfterMs({ failures: 6, lastFailureAt: last }, at(500))).toBe(1500);
    expect(loginRetryAfterMs({ failures: 6, lastFailureAt: last }, at(2000))).toBe(0);
    expect(loginRetryAfterMs({ failures: 3, lastFailureAt: last }, at(0))).toBe(0);
    expect(loginRetryAfterMs(null, at(0))).toBe(0);
  });

  it("at the cap, waits 15 minutes after the last failure", () => {
    expect(loginRetryAfterMs({ failures: 100, lastFailureAt: last }, at(MAX_LOGIN_WAIT_MS - 1))).toBe(1);
    expect(loginRetryAfterMs({ failures: 100, lastFailureAt: last }, at(MAX_LOGIN_WAIT_MS))).toBe(0);
  });
});

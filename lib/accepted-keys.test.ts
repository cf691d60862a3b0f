import { describe, expect, it } from "vitest";
import { ACCEPTED_KEY_TTL_MS, acceptedKeys } from "./accepted-keys";
import { manualClock } from "./clock";

describe("acceptedKeys", () => {
  it("knows a key from its acceptance until more than the time to live has passed", () => {
    const clock = manualClock();
    const keys = acceptedKeys(clock);
    expect(keys.acceptedLately("h1")).toBe(false);
    keys.accepted("h1");
    clock.advance(ACCEPTED_KEY_TTL_MS);
    expect(keys.acceptedLately("h1")).toBe(true);
    clock.advance(1);
    expect(keys.acceptedLately("h1")).toBe(false);
  });

  it("counts the time from the latest acceptance", () => {
    const clock = manualClock();
    const keys = acceptedKeys(clock);
    keys.accepted("h1");
    clock.advance(ACCEPTED_KEY_TTL_MS - 10);
    keys.accepted("h1");
    clock.advance(ACCEPTED_KEY_TTL_MS - 10);
    expect(keys.acceptedLately("h1")).toBe(true);
  });

  it("forgets a refused key at once, and others not", () => {
    const keys = acceptedKeys(manualClock());
    keys.accepted("h1");
    keys.accepted("h2");
    keys.refused("h1");
    keys.refused("h3");
    expect(keys.acceptedLately("h1")).toBe(false);
    expect(keys.acceptedLately("h2")).toBe(true);
  });

  it("keeps at most `max` keys, dropping the least recently accepted", () => {
    const keys = acceptedKeys(manualClock(), { max: 2 });
    keys.accepted("h1");
    keys.accepted("h2");
    keys.accepted("h1");
    keys.accepted("h3");
    expect(["h1", "h2", "h3"].map(keys.acceptedLately)).toEqual([true, false, true]);
  });
});

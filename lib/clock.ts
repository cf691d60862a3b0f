/** Time as the domain sees it: injected so timers, recency and expiry are testable. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock tests move by hand. */
export function manualClock(start = new Date("2026-01-01T00:00:00.000Z")) {
  let current = start.getTime();
  return {
    now: () => new Date(current),
    set(at: Date) {
      current = at.getTime();
    },
    advance(ms: number) {
      current += ms;
    },
  };
}

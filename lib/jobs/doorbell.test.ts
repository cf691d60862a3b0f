import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { manualClock } from "../clock";
import { silentLogger } from "../log";
import { timerDoorbell } from "./doorbell";

/**
 * The Node.js doorbell's timers against the clock the jobs table is read with. The fake timers
 * stand in for Node.js's event-loop time, the manual clock for the wall clock: they can disagree,
 * as after a long synchronous statement.
 */
describe("timerDoorbell", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function setup() {
    const clock = manualClock();
    const ran: string[] = [];
    const doorbell = timerDoorbell(
      clock,
      async (key) => {
        ran.push(key);
      },
      silentLogger,
    );
    const at = (ms: number) => new Date(clock.now().getTime() + ms);
    return { clock, ran, doorbell, at };
  }

  it("runs a job when its time comes, once per ring, the latest ring of a key winning", async () => {
    const { clock, ran, doorbell, at } = setup();
    await doorbell.ring([{ key: "a", runAt: at(100) }]);
    await doorbell.ring([{ key: "a", runAt: at(300) }]);
    clock.advance(100);
    vi.advanceTimersByTime(100);
    expect(ran).toEqual([]);
    clock.advance(200);
    vi.advanceTimersByTime(200);
    expect(ran).toEqual(["a"]);
    expect(doorbell.pending()).toBe(0);
  });

  it("waits the rest when its timer fires before the job's time by the clock", async () => {
    const { clock, ran, doorbell, at } = setup();
    await doorbell.ring([{ key: "early", runAt: at(100) }]);
    // The timer's 100 ms have passed by the loop's time, 60 by the clock (the loop's time lagged).
    clock.advance(60);
    vi.advanceTimersByTime(100);
    expect(ran).toEqual([]);
    expect(doorbell.pending()).toBe(1);
    clock.advance(40);
    vi.advanceTimersByTime(40);
    expect(ran).toEqual(["early"]);
    expect(doorbell.pending()).toBe(0);
  });

  it("stop clears every timer", async () => {
    const { clock, ran, doorbell, at } = setup();
    await doorbell.ring([
      { key: "a", runAt: at(10) },
      { key: "b", runAt: at(20) },
    ]);
    doorbell.stop();
    clock.advance(50);
    vi.advanceTimersByTime(50);
    expect(ran).toEqual([]);
  });
});

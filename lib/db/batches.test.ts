import { describe, expect, it } from "vitest";
import { drainInBatches } from "./batches";

/** A backlog of `n` rows that gives up to `limit` a call, recording each call's limit. */
function backlog(n: number) {
  const calls: number[] = [];
  let left = n;
  const deleteBatch = async (limit: number) => {
    calls.push(limit);
    const taken = Math.min(left, limit);
    left -= taken;
    return taken;
  };
  return { deleteBatch, calls, left: () => left };
}

describe("drainInBatches", () => {
  it("runs again while a batch comes back full, and stops at the first short one", async () => {
    const b = backlog(25);
    expect(await drainInBatches(b.deleteBatch, { batch: 10, batches: 5 })).toBe(25);
    expect(b.calls).toEqual([10, 10, 10]);
  });

  it("stops at the cap, leaving the rest for the next sweep", async () => {
    const b = backlog(100);
    expect(await drainInBatches(b.deleteBatch, { batch: 10, batches: 3 })).toBe(30);
    expect(b.left()).toBe(70);
  });

  it("runs once on an empty backlog", async () => {
    const b = backlog(0);
    expect(await drainInBatches(b.deleteBatch, { batch: 10, batches: 3 })).toBe(0);
    expect(b.calls).toEqual([10]);
  });
});

import { describe, expect, it } from "vitest";
import { lastPageOffset } from "../../ui/src/lib/paging";

/** Where an emptied or overshot page of a dashboard list goes back to (ui/src/lib/paging.ts). */
describe("lastPageOffset", () => {
  it.each([
    [0, 20, 0],
    [1, 20, 0],
    [20, 20, 0],
    [21, 20, 20],
    [40, 20, 20],
    [41, 20, 40],
    [7, 5, 5],
  ])("%i rows in pages of %i: the last page starts at %i", (total, limit, offset) => {
    expect(lastPageOffset(total, limit)).toBe(offset);
  });
});

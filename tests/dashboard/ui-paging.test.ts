import { describe, expect, it } from "vitest";
import { pageQuery } from "../../functions/schemas/inputs";
import { lastPageOffset, MAX_OFFSET, offsetOf } from "../../ui/src/lib/paging";

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

/** A browse list's `?offset=` (ui/src/lib/paging.ts): what the server takes, at most 1,000,000. */
describe("offsetOf", () => {
  it.each([
    [null, 0],
    ["", 0],
    ["abc", 0],
    ["-20", 0],
    ["2.5", 0],
    ["0", 0],
    ["40", 40],
    ["1000000", 1_000_000],
    // Past the server's cap ("offset Too big"): the cap, an empty page past the end, which goes
    // back to the last page with rows.
    ["1000001", 1_000_000],
    ["2000000", 1_000_000],
    ["1e300", 1_000_000],
  ])("offset=%s reads as %i", (offset, expected) => {
    const query = new URLSearchParams(offset === null ? "" : { offset });
    expect(offsetOf(query)).toBe(expected);
  });

  it("is the server's own cap", () => {
    expect(pageQuery.offset.safeParse(String(MAX_OFFSET)).success).toBe(true);
    expect(pageQuery.offset.safeParse(String(MAX_OFFSET + 1)).success).toBe(false);
  });
});

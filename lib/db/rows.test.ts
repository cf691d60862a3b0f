import { describe, expect, it } from "vitest";
import { z } from "zod";
import { dbInt, dbTimestamp, parsedRowsOf } from "./rows";

const Row = z.object({ id: z.string(), n: dbInt, at: dbTimestamp });

describe("parsedRowsOf", () => {
  it("reads rows of either driver's result shape, integers as numbers, extra columns dropped", () => {
    const at = new Date("2026-01-01T00:00:00Z");
    expect(parsedRowsOf(Row, { rows: [{ id: "a", n: "12", at, extra: 1 }] })).toEqual([{ id: "a", n: 12, at }]);
    expect(parsedRowsOf(Row, [{ id: "b", n: 3, at: "2026-01-01 00:00:00+00" }])).toEqual([
      { id: "b", n: 3, at: "2026-01-01 00:00:00+00" },
    ]);
    expect(parsedRowsOf(Row, { rows: [] })).toEqual([]);
  });

  it("a row of another shape is a plain Error (a 500), not a ZodError (a 400)", () => {
    let thrown: unknown;
    try {
      parsedRowsOf(Row, [{ id: 1, n: 2, at: null }]);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown).not.toBeInstanceOf(z.ZodError);
    expect(String(thrown)).toMatch(/Unexpected row from the database/);
  });
});

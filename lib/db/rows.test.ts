import { describe, expect, it } from "vitest";
import { z } from "zod";
import { dbInt, dbJson, dbNumber, dbTimestamp, parsedRowsOf } from "./rows";

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

describe("dbJson and dbNumber", () => {
  const Row = z.object({ page: dbJson(z.array(z.object({ seq: z.number() }))), score: dbNumber });

  it("reads json parsed (pglite, pg) or as text (Neon over HTTP), and numeric text as a number", () => {
    expect(parsedRowsOf(Row, [{ page: [{ seq: 1 }], score: 0.5 }])).toEqual([{ page: [{ seq: 1 }], score: 0.5 }]);
    expect(parsedRowsOf(Row, [{ page: '[{"seq":2}]', score: "0.25" }])).toEqual([{ page: [{ seq: 2 }], score: 0.25 }]);
  });

  it("json of another shape, or text that is not json, is the database's fault (a plain Error)", () => {
    expect(() => parsedRowsOf(Row, [{ page: [{ seq: "x" }], score: 1 }])).toThrow(/Unexpected row from the database/);
    let thrown: unknown;
    try {
      parsedRowsOf(Row, [{ page: "not json", score: 1 }]);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).not.toBeInstanceOf(SyntaxError);
    expect(String(thrown)).toMatch(/Unexpected row from the database/);
  });
});

import { describe, expect, it } from "vitest";
import {
  FREEZE_MAX_AGE,
  INSERT_SCALE,
  INSERT_THRESHOLD,
  type TableActivity,
  tablesToVacuum,
  VACUUM_SCALE,
  VACUUM_THRESHOLD,
} from "./pglite-vacuum";

const table = (over: Partial<TableActivity>): TableActivity => ({
  table: "t",
  liveRows: 1_000,
  deadRows: 0,
  insertedSinceVacuum: 0,
  xidAge: 1_000,
  ...over,
});

describe("tablesToVacuum (autovacuum's default rules)", () => {
  it("vacuums a table whose dead rows pass 50 + 20% of its live rows, not before", () => {
    const limit = VACUUM_THRESHOLD + VACUUM_SCALE * 1_000;
    expect(tablesToVacuum([table({ deadRows: limit })])).toEqual([]);
    expect(tablesToVacuum([table({ deadRows: limit + 1 })])).toEqual(["t"]);
    // A small table: the threshold alone.
    expect(tablesToVacuum([table({ liveRows: 1, deadRows: 51 })])).toEqual(["t"]);
    expect(tablesToVacuum([table({ liveRows: 1, deadRows: 50 })])).toEqual([]);
  });

  it("vacuums an append-only table after 1,000 + 20% of its rows were inserted since its last vacuum", () => {
    const limit = INSERT_THRESHOLD + INSERT_SCALE * 1_000;
    expect(tablesToVacuum([table({ insertedSinceVacuum: limit })])).toEqual([]);
    expect(tablesToVacuum([table({ insertedSinceVacuum: limit + 1 })])).toEqual(["t"]);
  });

  it("vacuums any table whose oldest unfrozen row is past the freeze age, however quiet", () => {
    expect(tablesToVacuum([table({ xidAge: FREEZE_MAX_AGE })])).toEqual([]);
    expect(tablesToVacuum([table({ xidAge: FREEZE_MAX_AGE + 1 })])).toEqual(["t"]);
  });

  it("names each table that needs it, in order", () => {
    expect(
      tablesToVacuum([
        table({ table: "a", deadRows: 10_000 }),
        table({ table: "b" }),
        table({ table: "c", xidAge: 2 * FREEZE_MAX_AGE }),
      ]),
    ).toEqual(["a", "c"]);
  });
});

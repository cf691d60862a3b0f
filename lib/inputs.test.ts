import { describe, expect, it } from "vitest";
import { dateInput, instantOf } from "./inputs";

describe("dateInput", () => {
  const parse = (v: string) => dateInput().safeParse(v);

  it("reads a datetime without an offset as UTC, whatever the host's time zone", () => {
    expect(instantOf("2026-03-01T10:00:00").toISOString()).toBe("2026-03-01T10:00:00.000Z");
    expect(instantOf("2026-03-01T10:00").toISOString()).toBe("2026-03-01T10:00:00.000Z");
    expect(parse("2026-03-01T10:00:00.5").data?.toISOString()).toBe("2026-03-01T10:00:00.500Z");
  });

  it("keeps the offset a datetime names, and a plain date is its UTC midnight", () => {
    expect(parse("2026-03-01T10:00:00+02:00").data?.toISOString()).toBe("2026-03-01T08:00:00.000Z");
    expect(parse("2026-03-01T10:00:00Z").data?.toISOString()).toBe("2026-03-01T10:00:00.000Z");
    expect(parse("2026-03-01").data?.toISOString()).toBe("2026-03-01T00:00:00.000Z");
  });

  it("still refuses what is no ISO date, and instants outside years 0001-9999", () => {
    for (const bad of ["2026-03-01 10:00:00", "01/03/2026", "2026-13-01", "2026-03-01T25:00:00", "tomorrow"]) {
      expect(parse(bad).success, bad).toBe(false);
    }
    expect(parse("0001-01-01T00:30:00+01:00").success).toBe(false);
    expect(parse("9999-12-31T23:59:59").success).toBe(true);
  });
});

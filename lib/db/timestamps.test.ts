import { describe, expect, it } from "vitest";
import { parsePgTimestamp } from "./timestamps";

const iso = (text: string) => parsePgTimestamp(text).toISOString();

describe("parsePgTimestamp", () => {
  it("reads the years 0001-0099 as they are, where new Date took them for 19xx and 20xx", () => {
    expect(new Date("0001-01-01 00:00:00+00").toISOString()).toBe("2001-01-01T00:00:00.000Z");
    expect(iso("0001-01-01 00:00:00+00")).toBe("0001-01-01T00:00:00.000Z");
    expect(iso("0049-12-31 23:59:59+00")).toBe("0049-12-31T23:59:59.000Z");
    expect(iso("0099-06-15 08:30:00+00")).toBe("0099-06-15T08:30:00.000Z");
  });

  it("applies the offset, hours, minutes and seconds, either sign", () => {
    expect(iso("0001-01-02 00:00:00+14")).toBe("0001-01-01T10:00:00.000Z");
    expect(iso("2026-11-30 12:00:00+05:30")).toBe("2026-11-30T06:30:00.000Z");
    expect(iso("2026-11-30 12:00:00-03")).toBe("2026-11-30T15:00:00.000Z");
    expect(iso("1900-01-01 00:00:00+00:09:21")).toBe("1899-12-31T23:50:39.000Z");
  });

  it("keeps milliseconds and drops the microseconds a Date cannot hold", () => {
    expect(iso("2026-11-30 12:00:00.123456+00")).toBe("2026-11-30T12:00:00.123Z");
    expect(iso("2026-11-30 12:00:00.5+00")).toBe("2026-11-30T12:00:00.500Z");
    expect(iso("2026-11-30 12:00:00.999999+00")).toBe("2026-11-30T12:00:00.999Z");
  });

  it("reads ISO text, a date past 9999, a BC date, and leaves another form to new Date", () => {
    expect(iso("0001-01-01T00:00:00+00:00")).toBe("0001-01-01T00:00:00.000Z");
    expect(iso("2026-11-30T12:00:00.250Z")).toBe("2026-11-30T12:00:00.250Z");
    expect(iso("2026-11-30 12:00:00")).toBe("2026-11-30T12:00:00.000Z");
    expect(iso("10000-01-01 00:00:00+00")).toBe("+010000-01-01T00:00:00.000Z");
    expect(iso("0001-01-01 00:00:00+00 BC")).toBe("0000-01-01T00:00:00.000Z");
    expect(Number.isNaN(parsePgTimestamp("infinity").getTime())).toBe(true);
  });

  it("agrees with new Date on every year from 100 on", () => {
    for (const text of ["0100-03-01 00:00:00+00", "1970-01-01 00:00:00+00", "2026-02-28 23:59:59.001-11"]) {
      expect(iso(text)).toBe(new Date(text).toISOString());
    }
  });
});

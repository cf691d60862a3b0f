import { describe, expect, it } from "vitest";
import { z } from "zod";
import { sumTotals, usageRange, usageSpans } from "./ledger";

const now = new Date("2026-03-15T10:00:00Z");

describe("usageRange", () => {
  it("defaults to the current month (UTC)", () => {
    expect(usageRange({}, now)).toEqual({
      start: new Date("2026-03-01T00:00:00Z"),
      end: new Date("2026-04-01T00:00:00Z"),
    });
  });

  it("refuses a range that ends before it starts, naming the parameter", () => {
    try {
      usageRange({ start: new Date("2026-04-01T00:00:00Z") }, now);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(z.ZodError);
      expect((err as z.ZodError).issues[0].path).toEqual(["start"]);
    }
  });

  it("refuses more than 366 days", () => {
    expect(() => usageRange({ start: new Date("2025-01-01T00:00:00Z"), end: now }, now)).toThrow(/366 days/);
    expect(usageRange({ start: new Date("2025-03-15T10:00:00Z"), end: now }, now).start.toISOString()).toBe(
      "2025-03-15T10:00:00.000Z",
    );
  });
});

describe("sumTotals", () => {
  it("adds every count of the groups", () => {
    const g = { calls: 2, inputTokens: 10, outputTokens: 5, totalTokens: 15, unknownCalls: 1, failedCalls: 0 };
    expect(sumTotals([g, { ...g, failedCalls: 1 }])).toEqual({
      calls: 4,
      inputTokens: 20,
      outputTokens: 10,
      totalTokens: 30,
      unknownCalls: 2,
      failedCalls: 1,
    });
    expect(sumTotals([]).calls).toBe(0);
  });
});

describe("usageSpans", () => {
  const at = (iso: string) => new Date(iso);

  it("reads a month of whole days from the daily sums alone", () => {
    expect(usageSpans(usageRange({}, now))).toEqual({ days: { from: "2026-03-01", to: "2026-04-01" }, calls: [] });
  });

  it("reads the partial day at either end from the calls", () => {
    expect(usageSpans({ start: at("2026-03-02T10:00:00Z"), end: at("2026-03-05T00:00:01Z") })).toEqual({
      days: { from: "2026-03-03", to: "2026-03-05" },
      calls: [
        { start: at("2026-03-02T10:00:00Z"), end: at("2026-03-03T00:00:00Z") },
        { start: at("2026-03-05T00:00:00Z"), end: at("2026-03-05T00:00:01Z") },
      ],
    });
    expect(usageSpans({ start: at("2026-03-02T00:00:00Z"), end: at("2026-03-03T12:00:00Z") })).toEqual({
      days: { from: "2026-03-02", to: "2026-03-03" },
      calls: [{ start: at("2026-03-03T00:00:00Z"), end: at("2026-03-03T12:00:00Z") }],
    });
  });

  it("reads a range without a whole day from the calls alone", () => {
    const inOneDay = { start: at("2026-03-02T10:00:00Z"), end: at("2026-03-02T11:00:00Z") };
    expect(usageSpans(inOneDay)).toEqual({ days: null, calls: [inOneDay] });
    const acrossMidnight = { start: at("2026-03-02T10:00:00Z"), end: at("2026-03-03T11:00:00Z") };
    expect(usageSpans(acrossMidnight)).toEqual({ days: null, calls: [acrossMidnight] });
  });
});

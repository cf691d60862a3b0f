import { describe, expect, it } from "vitest";
import {
  BUDGET_ALERT_GRACE_MS,
  budgetAlertMonths,
  budgetRecheckAt,
  budgetState,
  monthKey,
  monthStart,
  nextMonthStart,
} from "./budget";

describe("budget months (UTC)", () => {
  it("starts the month at midnight UTC on the 1st, whatever the time zone of the instant", () => {
    const now = new Date("2026-11-30T23:30:00-05:00"); // already December 1st in UTC
    expect(monthStart(now).toISOString()).toBe("2026-12-01T00:00:00.000Z");
    expect(monthKey(now)).toBe("2026-12");
  });

  it("rolls over the year", () => {
    const now = new Date("2026-12-31T23:59:59.999Z");
    expect(nextMonthStart(now).toISOString()).toBe("2027-01-01T00:00:00.000Z");
    expect(monthStart(nextMonthStart(now)).toISOString()).toBe("2027-01-01T00:00:00.000Z");
  });
});

describe("budgetState", () => {
  const now = new Date("2026-02-10T12:00:00Z");
  it("without a budget: nothing remains to count and nothing is exhausted", () => {
    expect(budgetState(null, 5000, now)).toEqual({
      monthlyTokenBudget: null,
      month: "2026-02",
      spent: 5000,
      remaining: null,
      exhausted: false,
      resetsAt: "2026-03-01T00:00:00.000Z",
    });
  });
  it("is exhausted once the spent tokens reach the budget, never with a negative remainder", () => {
    expect(budgetState(100, 99, now)).toMatchObject({ remaining: 1, exhausted: false });
    expect(budgetState(100, 100, now)).toMatchObject({ remaining: 0, exhausted: true });
    expect(budgetState(100, 250, now)).toMatchObject({ remaining: 0, exhausted: true });
  });
});

describe("budgetRecheckAt", () => {
  it("looks again a tenth short of an interval on (so the next sweep runs it), or at the month's end when that comes first", () => {
    expect(budgetRecheckAt(new Date("2026-05-10T00:00:00Z"), 120_000).toISOString()).toBe("2026-05-10T00:01:48.000Z");
    expect(budgetRecheckAt(new Date("2026-05-31T23:59:00Z"), 120_000).toISOString()).toBe("2026-06-01T00:00:00.000Z");
  });
});

describe("budgetAlertMonths", () => {
  it("looks at the month before too within the grace, so a budget spent after its last sweep is announced", () => {
    const lastMonth = { month: "2026-11", start: "2026-11-01T00:00:00.000Z", resetsAt: "2026-12-01T00:00:00.000Z" };
    const thisMonth = { month: "2026-12", start: "2026-12-01T00:00:00.000Z", resetsAt: "2027-01-01T00:00:00.000Z" };
    expect(budgetAlertMonths(new Date("2026-12-01T00:01:30Z"))).toEqual([lastMonth, thisMonth]);
    const graceEnds = new Date(Date.parse(thisMonth.start) + BUDGET_ALERT_GRACE_MS);
    expect(budgetAlertMonths(new Date(graceEnds.getTime() - 1))).toEqual([lastMonth, thisMonth]);
    expect(budgetAlertMonths(graceEnds)).toEqual([thisMonth]);
    expect(budgetAlertMonths(new Date("2026-12-15T12:00:00Z"))).toEqual([thisMonth]);
  });

  it("rolls over the year", () => {
    expect(budgetAlertMonths(new Date("2027-01-01T00:00:00Z")).map((m) => m.month)).toEqual(["2026-12", "2027-01"]);
  });
});

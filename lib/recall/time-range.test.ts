import { describe, expect, it } from "vitest";
import { timeRangeOf } from "./time-range";

const NOW = new Date("2024-06-12T15:00:00.000Z"); // a Wednesday
const range = (q: string, now = NOW) => {
  const r = timeRangeOf(q, now);
  return r ? [r.from.toISOString().slice(0, 10), r.to.toISOString().slice(0, 10)] : null;
};

describe("timeRangeOf", () => {
  it("reads absolute dates, months, seasons and years", () => {
    expect(range("what did I do on 2023-05-05?")).toEqual(["2023-05-05", "2023-05-06"]);
    expect(range("What happened on May 5th, 2023")).toEqual(["2023-05-05", "2023-05-06"]);
    expect(range("the 5th of May 2023")).toEqual(["2023-05-05", "2023-05-06"]);
    expect(range("what did I do in May 2023?")).toEqual(["2023-05-01", "2023-06-01"]);
    expect(range("trips in Sept. 2022")).toEqual(["2022-09-01", "2022-10-01"]);
    expect(range("December 2023 plans")).toEqual(["2023-12-01", "2024-01-01"]);
    expect(range("where did I live in 2021")).toEqual(["2021-01-01", "2022-01-01"]);
    expect(range("summer of 2022")).toEqual(["2022-06-01", "2022-09-01"]);
    expect(range("winter 2022")).toEqual(["2022-12-01", "2023-03-01"]);
  });

  it("reads open intervals around a year", () => {
    expect(range("where did I work before 2022")).toEqual(["0001-01-01", "2022-01-01"]);
    expect(range("hobbies since 2020")).toEqual(["2020-01-01", "9999-12-31"]);
    expect(range("jobs after 2020")).toEqual(["2021-01-01", "9999-12-31"]);
  });

  it("reads relative expressions against now", () => {
    expect(range("what did I eat yesterday")).toEqual(["2024-06-11", "2024-06-12"]);
    expect(range("what did I do last week")).toEqual(["2024-06-03", "2024-06-10"]);
    expect(range("this week")).toEqual(["2024-06-10", "2024-06-17"]);
    expect(range("last month")).toEqual(["2024-05-01", "2024-06-01"]);
    expect(range("last year")).toEqual(["2023-01-01", "2024-01-01"]);
    expect(range("3 months ago")).toEqual(["2024-03-01", "2024-04-01"]);
    expect(range("two years ago")).toEqual(["2022-01-01", "2023-01-01"]);
    expect(range("a week ago")).toEqual(["2024-06-02", "2024-06-09"]);
    expect(range("last summer")).toEqual(["2023-06-01", "2023-09-01"]);
    expect(range("last winter")).toEqual(["2023-12-01", "2024-03-01"]);
  });

  it("reads a bare month as the latest one that has begun", () => {
    expect(range("what did I do in May")).toEqual(["2024-05-01", "2024-06-01"]);
    expect(range("in June")).toEqual(["2024-06-01", "2024-07-01"]);
    expect(range("in August")).toEqual(["2023-08-01", "2023-09-01"]);
    expect(range("last january")).toEqual(["2024-01-01", "2024-02-01"]);
  });

  it("says nothing when no time is named, or the date is impossible", () => {
    for (const q of [
      "where do I live?",
      "my sister's job",
      "I ran 4000 meters",
      "in 3000",
      "2023-02-30",
      "",
      "May I ask",
    ]) {
      expect(range(q)).toBeNull();
    }
    expect(timeRangeOf(undefined, NOW)).toBeNull();
  });

  it("stays within the years a timestamp holds, read against an asOf at either end; years 0-99 are themselves", () => {
    const last = new Date("9999-12-31T12:00:00.000Z");
    const iso = (q: string, now: Date) => {
      const r = timeRangeOf(q, now);
      return r ? [r.from.toISOString(), r.to.toISOString()] : null;
    };
    expect(iso("where do I live today", last)).toEqual(["9999-12-31T00:00:00.000Z", "9999-12-31T23:59:59.999Z"]);
    expect(iso("this year", last)).toEqual(["9999-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z"]);
    expect(iso("this week", last)?.[1]).toBe("9999-12-31T23:59:59.999Z");
    expect(iso("this month", new Date("9999-12-15T00:00:00.000Z"))?.[1]).toBe("9999-12-31T23:59:59.999Z");
    expect(range("lisbon 2 years ago", new Date("0001-06-01T00:00:00.000Z"))).toBeNull();
    expect(range("99 years ago", new Date("0050-06-01T00:00:00.000Z"))).toBeNull();
    expect(range("this year", new Date("0001-06-01T00:00:00.000Z"))).toEqual(["0001-01-01", "0002-01-01"]);
    expect(range("yesterday", new Date("0050-06-10T08:00:00.000Z"))).toEqual(["0050-06-09", "0050-06-10"]);
  });

  it("the rule that matches first is the most specific one", () => {
    expect(range("in May 2023, before 2024")).toEqual(["2023-05-01", "2023-06-01"]);
    expect(range("on March 3, 2022 in 2022")).toEqual(["2022-03-03", "2022-03-04"]);
  });
});

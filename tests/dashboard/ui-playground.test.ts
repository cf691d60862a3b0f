import { describe, expect, it } from "vitest";
import { recallRequestOf } from "../../ui/src/lib/recall-request";
import { missingSynthesis } from "../../ui/src/lib/synthesis";

/** The recall playground's reading of its link and of the server's answer (pure functions in ui/src/lib). */
describe("recallRequestOf", () => {
  const of = (search: string) => recallRequestOf(new URLSearchParams(search));

  it("is null before the first run (no dataset)", () => {
    expect(of("q=lisbon")).toBeNull();
  });

  it("reads the form's fields, numbers as numbers", () => {
    expect(of("dataset=travel&q=lisbon&limit=5&minConfidence=0.7&synthesis=1&messages=1")).toEqual({
      request: {
        dataset: "travel",
        query: "lisbon",
        include: ["synthesis", "messages"],
        limit: 5,
        minConfidence: 0.7,
        asOf: undefined,
      },
    });
  });

  it("leaves out empty numbers", () => {
    expect(of("dataset=travel&limit=")).toMatchObject({ request: { limit: undefined, minConfidence: undefined } });
  });

  it("sends an out-of-range number as it is, for the server's own message", () => {
    expect(of("dataset=travel&limit=500")).toMatchObject({ request: { limit: 500 } });
  });

  it.each(["limit=abc", "minConfidence=high", "limit=Infinity"])("refuses %s rather than sending it as null", (bad) => {
    const [key] = bad.split("=");
    expect(of(`dataset=travel&${bad}`)).toEqual({
      invalid: expect.stringContaining(`${key} in the link is not a number`),
    });
  });
});

describe("missingSynthesis", () => {
  it("says an empty block is never sent to the model", () => {
    expect(missingSynthesis(true, [{ name: "sql" }])).toBe("None: the context block is empty.");
  });

  it("says the call was skipped when the answer has no synthesis timing (budget spent)", () => {
    expect(missingSynthesis(false, [{ name: "embedding" }, { name: "sql" }])).toBe(
      "Skipped: the project's monthly token budget is spent.",
    );
  });

  it("says the call failed when it was made", () => {
    expect(missingSynthesis(false, [{ name: "sql" }, { name: "synthesis" }])).toBe(
      "None: the model call failed (recall still answered).",
    );
  });
});

import { describe, expect, it } from "vitest";
import { formatPredicate } from "../../ui/src/lib/predicate";

/** The dashboard's reading of a predicate (ui/src/lib/predicate.ts): a pure function, tested here. */
describe("formatPredicate", () => {
  it.each([
    ["lives_in", "lives in"],
    ["plans_trip_to", "plans trip to"],
    ["prefers", "prefers"],
    ["works__at", "works at"],
    ["_lives_in_", "lives in"],
    ["worksAt", "works at"],
    ["isAllergicTo", "is allergic to"],
    ["visited_NYC", "visited NYC"],
    ["owns_2_cats", "owns 2 cats"],
    ["loves night trains", "loves night trains"],
    ["vit_à_Zürich", "vit à Zürich"],
    ["self-employed", "self-employed"],
  ])("%s reads %s", (raw, shown) => {
    expect(formatPredicate(raw)).toBe(shown);
  });

  it("gives back what it cannot make words of", () => {
    expect(formatPredicate("___")).toBe("___");
    expect(formatPredicate("")).toBe("");
  });
});

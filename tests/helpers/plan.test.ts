import { describe, expect, it } from "vitest";
import { planNodes, planOf } from "./plan";

const plan = {
  Plan: {
    "Node Type": "Limit",
    Plans: [
      { "Node Type": "Sort", Plans: [{ "Node Type": "Index Scan", "Index Name": "a" }] },
      { "Node Type": "Seq Scan", "Relation Name": "facts" },
    ],
  },
  "Planning Time": 0.1,
};

describe("planOf and planNodes", () => {
  it("reads EXPLAIN's row as text (PGlite) or parsed (node-postgres), and walks it depth first", () => {
    const asText = planOf([{ "QUERY PLAN": JSON.stringify([plan]) }]);
    expect(planOf([{ "QUERY PLAN": [plan] }])).toEqual(asText);
    expect(planOf({ rows: [{ "QUERY PLAN": [plan] }] })).toEqual(asText);
    expect(asText["Planning Time"]).toBe(0.1);
    expect(planNodes(asText.Plan).map((n) => n["Node Type"])).toEqual(["Limit", "Sort", "Index Scan", "Seq Scan"]);
  });

  it("refuses a row that holds no plan", () => {
    expect(() => planOf([])).toThrow(/not an EXPLAIN/);
    expect(() => planOf([{ x: "[{}]" }])).toThrow(/not an EXPLAIN/);
  });
});

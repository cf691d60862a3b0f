import { describe, expect, it } from "vitest";
import { JOB_KINDS } from "./kinds";
import { queueByKind } from "./stats";

describe("queueByKind", () => {
  it("reports every known kind (zeros when absent), then any other kind the table holds", () => {
    const rows = [
      { kind: "episode", scheduled: 0, due: 2, running: 1, oldestDueSeconds: 12.5 },
      { kind: "retired-kind", scheduled: 1, due: 0, running: 0, oldestDueSeconds: 0 },
    ];
    const stats = queueByKind(rows);
    expect(stats.map((s) => s.kind)).toEqual([...Object.keys(JOB_KINDS), "retired-kind"]);
    expect(stats.find((s) => s.kind === "episode")).toEqual(rows[0]);
    expect(stats.find((s) => s.kind === "webhook")).toEqual({
      kind: "webhook",
      scheduled: 0,
      due: 0,
      running: 0,
      oldestDueSeconds: 0,
    });
  });
});

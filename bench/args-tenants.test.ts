import { describe, expect, it } from "vitest";
import { parseBenchArgs, UsageError, usage } from "./args";
import { unitsOf } from "./scenarios";

describe("the tenants scenario's switches", () => {
  it("reads --datasets and --projects (1,000 datasets in one project unless given)", () => {
    expect(parseBenchArgs([])).toMatchObject({ datasets: 1_000, projects: 1 });
    expect(parseBenchArgs(["--datasets", "1e4", "--projects=100"])).toMatchObject({ datasets: 10_000, projects: 100 });
    expect(() => parseBenchArgs(["--datasets", "0"])).toThrow(UsageError);
    expect(() => parseBenchArgs(["--projects", "many"])).toThrow(/--projects/);
    expect(usage()).toContain("--datasets");
  });

  it("reads --messages-per-dataset (none unless given)", () => {
    expect(parseBenchArgs([])).toMatchObject({ messagesPerDataset: 0 });
    expect(parseBenchArgs(["--messages-per-dataset", "100"])).toMatchObject({ messagesPerDataset: 100 });
    expect(() => parseBenchArgs(["--messages-per-dataset", "0"])).toThrow(/--messages-per-dataset/);
    expect(usage()).toContain("--messages-per-dataset");
  });

  it("runs once per size and dimension, and only when asked for by name", () => {
    const args = parseBenchArgs(["--only", "tenants", "--facts", "1e5,1e6"]);
    expect(unitsOf(args)).toEqual([
      { scenario: "tenants", facts: 100_000, dims: 256 },
      { scenario: "tenants", facts: 1_000_000, dims: 256 },
    ]);
    expect(parseBenchArgs([]).only).not.toContain("tenants");
  });
});

import { describe, expect, it } from "vitest";
import { usageCollector } from "./collector";

const call = {
  kind: "chat" as const,
  model: "m",
  inputTokens: 3,
  outputTokens: 4,
  totalTokens: 7,
  outcome: "ok" as const,
};

describe("usageCollector", () => {
  it("tags each call with its operation and gives the calls once, in order", () => {
    const usage = usageCollector();
    usage.meter("chat")(call);
    usage.meter("recall_embedding")({ ...call, kind: "embedding", outputTokens: null });
    expect(usage.pending).toBe(2);
    expect(usage.take().map((e) => [e.operation, e.kind, e.outputTokens])).toEqual([
      ["chat", "chat", 4],
      ["recall_embedding", "embedding", null],
    ]);
    expect(usage.take()).toEqual([]);
    expect(usage.pending).toBe(0);
  });

  it("takes back the events of a statement that failed, ahead of newer ones", () => {
    const usage = usageCollector();
    usage.meter("fact_extraction")(call);
    const taken = usage.take();
    usage.meter("contradiction_judge")(call);
    usage.giveBack(taken);
    expect(usage.take().map((e) => e.operation)).toEqual(["fact_extraction", "contradiction_judge"]);
  });
});

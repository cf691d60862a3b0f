import { describe, expect, it } from "vitest";
import type { UsageEvent } from "../llm/usage";
import { USAGE_CARRY_ATTEMPTS, usageBacklog } from "./backlog";

const event = (operation: UsageEvent["operation"]): UsageEvent => ({
  operation,
  kind: "chat",
  model: "m",
  inputTokens: 3,
  outputTokens: 4,
  totalTokens: 7,
  outcome: "ok",
});

describe("usageBacklog", () => {
  it("keeps each call with whose it was and when, and gives them once, oldest first", () => {
    const backlog = usageBacklog();
    backlog.add([event("recall_rerank"), event("recall_synthesis")], { projectId: "prj_a", dataset: "d" }, "t1");
    backlog.add([event("chat")], { projectId: "prj_b", dataset: null }, "t2");
    expect(backlog.pending).toBe(3);
    expect(backlog.take().map((c) => [c.operation, c.projectId, c.dataset, c.at, c.attempts])).toEqual([
      ["recall_rerank", "prj_a", "d", "t1", 0],
      ["recall_synthesis", "prj_a", "d", "t1", 0],
      ["chat", "prj_b", null, "t2", 0],
    ]);
    expect(backlog.take()).toEqual([]);
  });

  it("takes back the calls of a statement that failed, ahead of newer ones", () => {
    const backlog = usageBacklog();
    backlog.add([event("chat")], { projectId: "prj_a", dataset: "d" }, "t1");
    const taken = backlog.take();
    backlog.add([event("recall_rerank")], { projectId: "prj_a", dataset: "d" }, "t2");
    expect(backlog.giveBack(taken)).toEqual([]);
    expect(backlog.take().map((c) => [c.operation, c.attempts])).toEqual([
      ["chat", 1],
      ["recall_rerank", 0],
    ]);
  });

  it("drops a call whose carrying statements failed USAGE_CARRY_ATTEMPTS times, returning it", () => {
    const backlog = usageBacklog();
    backlog.add([event("chat")], { projectId: "prj_a", dataset: "d" }, "t1");
    for (let attempt = 1; attempt < USAGE_CARRY_ATTEMPTS; attempt++)
      expect(backlog.giveBack(backlog.take())).toEqual([]);
    expect(backlog.pending).toBe(1);
    expect(backlog.giveBack(backlog.take()).map((c) => c.attempts)).toEqual([USAGE_CARRY_ATTEMPTS]);
    expect(backlog.pending).toBe(0);
  });

  it("waits its time, or ends the wait at once when hurried", async () => {
    const backlog = usageBacklog();
    const started = Date.now();
    await backlog.wait(30);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    const long = backlog.wait(60_000);
    backlog.hurry();
    await long;
  });
});

import { describe, expect, it } from "vitest";
import { COMPACT_KEEP_RECENT, crossesThreshold, type FoldState, planFold } from "./compaction";

const state = (over: Partial<FoldState> = {}): FoldState => ({
  dataset: "d",
  compacted_seq: 0,
  live_count: 10,
  summary_id: null,
  summary_content: null,
  summary_from: null,
  fold: [
    { seq: 1, role: "user", content: "I moved to\n  Lisbon" },
    { seq: 2, role: "assistant", content: "Nice." },
  ],
  ...over,
});

describe("planFold", () => {
  it("folds the messages one line each, from the first to the last", () => {
    expect(planFold(state())).toEqual({
      expected: 0,
      fromSeq: 1,
      toSeq: 2,
      count: 2,
      previousSummaryId: null,
      prompt: "Conversation:\n[1] user: I moved to Lisbon\n[2] assistant: Nice.",
    });
  });

  it("folds the previous summary in: its text first, its start as the new summary's start", () => {
    const plan = planFold(
      state({
        compacted_seq: 20,
        summary_id: "msg_s",
        summary_content: "Lives in Porto.",
        summary_from: 3,
        fold: [{ seq: 22, role: "user", content: "Now Lisbon." }],
      }),
    );
    expect(plan).toMatchObject({ expected: 20, fromSeq: 3, toSeq: 22, count: 1, previousSummaryId: "msg_s" });
    expect(plan).toHaveProperty(
      "prompt",
      "Earlier summary:\nLives in Porto.\n\nConversation since:\n[22] user: Now Lisbon.",
    );
  });

  it("answers the nothing-to-compact shape when nothing is old enough, naming the live count", () => {
    expect(planFold(state({ live_count: 4, fold: [] }))).toEqual({
      ok: true,
      compacted: false,
      message: `Nothing to compact: 4 message(s) not yet compacted, and the newest ${COMPACT_KEEP_RECENT} are always kept`,
    });
  });
});

describe("crossesThreshold", () => {
  it("compacts at the threshold or above it, never when off", () => {
    expect([19, 20, 21, 40].map((n) => crossesThreshold(n, 20, null))).toEqual([false, true, true, true]);
    expect(crossesThreshold(20, null, null)).toBe(false);
  });

  it("after a failed attempt, again only a threshold more messages on", () => {
    expect([20, 21, 39, 40, 41].map((n) => crossesThreshold(n, 20, 20))).toEqual([false, false, false, true, true]);
    // Failed at 25 (a threshold lowered from above): next at 45.
    expect([26, 44, 45].map((n) => crossesThreshold(n, 20, 25))).toEqual([false, false, true]);
  });
});

import { describe, expect, it } from "vitest";
import { batchRows, earlyIssues, placedRows, sequenced, threadsToCompact } from "./batch";

const now = "2026-01-01T00:00:00.000Z";

describe("batchRows", () => {
  it("numbers the items, defaults createdAt to now and drops empty objects", () => {
    const rows = batchRows(
      [
        { threadId: "thr_a", role: "user", content: "hi", metadata: {}, tokens: { input: 1 } },
        { threadId: "thr_b", role: "assistant", content: "yo", createdAt: new Date("2025-12-31T00:00:00Z") },
      ],
      now,
    );
    expect(rows.map((r) => [r.ord, r.thread_id, r.created_at, r.defaulted, r.metadata, r.tokens])).toEqual([
      [0, "thr_a", now, true, undefined, { input: 1 }],
      [1, "thr_b", "2025-12-31T00:00:00.000Z", false, undefined, undefined],
    ]);
    expect(rows[0].id).toMatch(/^msg_/);
    expect(rows[0].id).not.toBe(rows[1].id);
  });
});

describe("placedRows", () => {
  it("takes the time the statement stored for the rows it moved, and keeps the others", () => {
    const rows = [
      { ord: 0, created_at: now },
      { ord: 1, created_at: now },
    ];
    expect(placedRows(rows, [{ ord: 1, at: "2026-01-01 00:00:05+00" }])).toEqual([
      { ord: 0, created_at: now },
      { ord: 1, created_at: "2026-01-01T00:00:05.000Z" },
    ]);
  });
});

describe("sequenced", () => {
  it("gives each thread's items, in request order, the numbers ending at its new last_seq", () => {
    const row = (id: string, thread_id: string) => ({ id, thread_id, role: "user" as const, created_at: now });
    const out = sequenced(
      [row("m1", "a"), row("m2", "b"), row("m3", "a")],
      [
        { id: "a", last_seq: 12, n: 2 },
        { id: "b", last_seq: 1, n: 1 },
      ],
    );
    expect(out.map((m) => [m.messageId, m.sequenceNumber])).toEqual([
      ["m1", 11],
      ["m2", 1],
      ["m3", 12],
    ]);
  });
});

describe("earlyIssues", () => {
  it("names each early item in request order with its thread's last message time", () => {
    const issues = earlyIssues(
      [
        { ord: 2, last_at: "2026-01-01T00:00:00Z" },
        { ord: 0, last_at: "2026-01-01T00:00:00Z" },
      ],
      [{ created_at: "x0" }, { created_at: "x1" }, { created_at: "x2" }],
    );
    expect(issues.map((i) => [i.path, i.input])).toEqual([
      [["messages", 0, "createdAt"], "x0"],
      [["messages", 2, "createdAt"], "x2"],
    ]);
    expect(issues[0].message).toBe("Must not be before the thread's last message (2026-01-01T00:00:00.000Z)");
  });
});

describe("threadsToCompact", () => {
  it("picks the threads the batch left at the threshold or above it, in id order", () => {
    const touched = [
      { id: "c", live_count: 21, compact_failed_count: null }, // above 10
      { id: "a", live_count: 10, compact_failed_count: null }, // at 10
      { id: "b", live_count: 9, compact_failed_count: null }, // below
      { id: "d", live_count: 19, compact_failed_count: 12 }, // failed at 12: next at 22
    ];
    expect(threadsToCompact(touched, 10)).toEqual(["a", "c"]);
    expect(threadsToCompact(touched, "10")).toEqual(["a", "c"]);
    expect(threadsToCompact(touched, null)).toEqual([]);
  });
});

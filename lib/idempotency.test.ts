import { describe, expect, it } from "vitest";
import { answerScope, type ClaimRow, claimOutcome } from "./idempotency";

const claim = { projectId: "prj_1", key: "k", claimId: "c1" };
const row = (outcome: ClaimRow["outcome"], status: number | null = null): ClaimRow => ({
  outcome,
  response_status: status,
  response_body: status === null ? null : '{"ok":true}',
  response_content_type: status === null ? null : "application/json",
});

describe("claimOutcome", () => {
  it("claims a fresh key and a taken-over one, saying which", () => {
    expect(claimOutcome(row("claimed"), claim)).toEqual({
      kind: "claimed",
      claim,
      takenOver: false,
      holderWrote: false,
    });
    expect(claimOutcome(row("taken-over"), claim)).toEqual({
      kind: "claimed",
      claim,
      takenOver: true,
      holderWrote: false,
    });
    // A holder that died after writing: the new claim must not write again.
    expect(claimOutcome({ ...row("taken-over"), holder_wrote: true }, claim)).toMatchObject({ holderWrote: true });
    expect(claimOutcome({ ...row("claimed"), holder_wrote: true }, claim)).toMatchObject({ holderWrote: false });
  });

  it("replays the stored answer", () => {
    expect(claimOutcome(row("replay", 201), claim)).toEqual({
      kind: "replay",
      response: { status: 201, body: '{"ok":true}', contentType: "application/json" },
    });
  });

  it("tells a mismatch, and treats a running claim or no row as running", () => {
    expect(claimOutcome(row("mismatch"), claim)).toEqual({ kind: "mismatch" });
    expect(claimOutcome(row("running"), claim)).toEqual({ kind: "running" });
    expect(claimOutcome(undefined, claim)).toEqual({ kind: "running" });
  });
});

describe("answerScope", () => {
  const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  const none = new Uint8Array(0);

  it("takes the dataset, thread or episode a path names (decoded), without reading the body", () => {
    expect(answerScope("POST", "/v1/memory/recall/datasets/team%2F%CE%B1", none)).toEqual({
      datasets: ["team/α"],
      threadIds: [],
      episodeIds: [],
    });
    const body = bytes({ dataset: "ignored" });
    expect(answerScope("POST", "/v1/memory/working/threads/thr_1/chat", body).threadIds).toEqual(["thr_1"]);
    expect(answerScope("POST", "/v1/threads/thr_2/end", body)).toEqual({
      datasets: [],
      threadIds: ["thr_2"],
      episodeIds: [],
    });
    expect(answerScope("POST", "/v1/memory/episodic/episodes/epi_1/retry", none).episodeIds).toEqual(["epi_1"]);
    expect(answerScope("POST", "/v1/memory/semantic/datasets/ds/facts/fct_1", none).datasets).toEqual(["ds"]);
  });

  it("reads a body's dataset, or the batch's thread ids, when the path names nothing", () => {
    expect(answerScope("POST", "/v1/threads", bytes({ dataset: "user-42", tags: ["a"] })).datasets).toEqual([
      "user-42",
    ]);
    expect(answerScope("POST", "/v1/memory/recall", bytes({ dataset: "user-42", query: "q" })).datasets).toEqual([
      "user-42",
    ]);
    const batch = bytes({ messages: [{ threadId: "thr_a" }, { threadId: "thr_b" }, { threadId: "thr_a" }, {}] });
    expect(answerScope("POST", "/v1/memory/working/messages:batch", batch).threadIds).toEqual(["thr_a", "thr_b"]);
  });

  it("names a batch's threads only while the route can take it (1,000 items): a larger one is refused unread", () => {
    const items = (n: number) => Array.from({ length: n }, (_, i) => ({ threadId: `thr_${i}` }));
    const scoped = (n: number) =>
      answerScope("POST", "/v1/memory/working/messages:batch", bytes({ messages: items(n) })).threadIds.length;
    expect(scoped(1_000)).toBe(1_000);
    expect(scoped(1_001)).toBe(0);
    expect(scoped(200_000)).toBe(0);
  });

  it("names nothing for the erase itself: its answer is counts, and its running claim is not erased", () => {
    const empty = { datasets: [], threadIds: [], episodeIds: [] };
    expect(answerScope("DELETE", "/v1/memory/recall/datasets/user-42", none)).toEqual(empty);
    expect(answerScope("DELETE", "/v1/memory/semantic/datasets/user-42/facts/fct_1", none).datasets).toEqual([
      "user-42",
    ]);
  });

  it("takes a name as the route stores it: a lone surrogate as U+FFFD, one with a NUL (refused there) not at all", () => {
    const lone = String.fromCharCode(0xd800);
    expect(answerScope("POST", "/v1/threads", bytes({ dataset: `a${lone}b` })).datasets).toEqual(["a\ufffdb"]);
    expect(answerScope("POST", "/v1/threads", bytes({ dataset: "a\u0000b" })).datasets).toEqual([]);
    const batch = bytes({ messages: [{ threadId: `thr_${lone}` }, { threadId: 7 }, { threadId: "thr_\u0000" }] });
    expect(answerScope("POST", "/v1/memory/working/messages:batch", batch).threadIds).toEqual(["thr_\ufffd"]);
  });

  it("names nothing for a body that is not a JSON object, or a malformed path segment", () => {
    const empty = { datasets: [], threadIds: [], episodeIds: [] };
    expect(answerScope("POST", "/v1/threads", new TextEncoder().encode("{"))).toEqual(empty);
    expect(answerScope("POST", "/v1/threads", bytes([1, 2]))).toEqual(empty);
    expect(answerScope("POST", "/v1/memory/recall/datasets/%E0%A4%A", none).datasets).toEqual(["%E0%A4%A"]);
  });
});

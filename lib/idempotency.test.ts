import { describe, expect, it } from "vitest";
import { type ClaimRow, claimOutcome } from "./idempotency";

const claim = { projectId: "prj_1", key: "k", claimId: "c1" };
const row = (outcome: ClaimRow["outcome"], status: number | null = null): ClaimRow => ({
  outcome,
  response_status: status,
  response_body: status === null ? null : '{"ok":true}',
  response_content_type: status === null ? null : "application/json",
});

describe("claimOutcome", () => {
  it("claims a fresh key and a taken-over one, saying which", () => {
    expect(claimOutcome(row("claimed"), claim)).toEqual({ kind: "claimed", claim, takenOver: false });
    expect(claimOutcome(row("taken-over"), claim)).toEqual({ kind: "claimed", claim, takenOver: true });
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

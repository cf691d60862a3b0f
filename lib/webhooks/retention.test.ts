import { describe, expect, it } from "vitest";
import { deliveryRetentionCutoff } from "./retention";

describe("deliveryRetentionCutoff", () => {
  it("is the retention's days before now, or none when deliveries are kept for ever", () => {
    const now = new Date("2026-03-31T12:00:00Z");
    expect(deliveryRetentionCutoff(now, 30)?.toISOString()).toBe("2026-03-01T12:00:00.000Z");
    expect(deliveryRetentionCutoff(now, 1)?.toISOString()).toBe("2026-03-30T12:00:00.000Z");
    expect(deliveryRetentionCutoff(now, 0)).toBeNull();
  });
});

import { describe, expect, it } from "vitest";
import { EARLY_DELIVERY_WAIT_MS, earlyDeliveryWait } from "./callback";

describe("earlyDeliveryWait", () => {
  it("waits out a job due within the tolerance", () => {
    expect(earlyDeliveryWait(1)).toBe(1);
    expect(earlyDeliveryWait(1_200)).toBe(1_200);
    expect(earlyDeliveryWait(EARLY_DELIVERY_WAIT_MS)).toBe(EARLY_DELIVERY_WAIT_MS);
  });

  it("does not wait for a job due later, one already due, or none (gone, or held by a worker)", () => {
    expect(earlyDeliveryWait(EARLY_DELIVERY_WAIT_MS + 1)).toBeNull();
    expect(earlyDeliveryWait(30 * 60_000)).toBeNull();
    expect(earlyDeliveryWait(0)).toBeNull();
    expect(earlyDeliveryWait(-5)).toBeNull();
    expect(earlyDeliveryWait(null)).toBeNull();
  });
});

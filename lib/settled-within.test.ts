import { describe, expect, it } from "vitest";
import { settledWithin } from "./settled-within";

describe("settledWithin", () => {
  it("is settled for work that ends (or fails) in time, late for work that does not", async () => {
    expect(await settledWithin(Promise.resolve(1), 50)).toBe("settled");
    expect(await settledWithin(Promise.reject(new Error("x")), 50)).toBe("settled");
    expect(await settledWithin(new Promise(() => {}), 20)).toBe("late");
  });
});

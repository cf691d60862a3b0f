import { describe, expect, it } from "vitest";
import { ID_PREFIXES, newId } from "./ids";

describe("ids", () => {
  it("gives every kind of id a prefix of its own (a webhook delivery is not a chat message)", () => {
    const prefixes = Object.values(ID_PREFIXES);
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it("makes a prefixed id of 20 base36 characters, a new one each time", () => {
    const a = newId("thr");
    expect(a).toMatch(/^thr_[0-9a-z]{20}$/);
    expect(newId("thr")).not.toBe(a);
  });
});

import { describe, expect, it } from "vitest";
import { StatementCache } from "./statement-cache";

describe("StatementCache", () => {
  it("runs a text plain the first time, prepares it the second, then executes the named statement", () => {
    const cache = new StatementCache(4);
    expect(cache.step("SELECT 1")).toEqual({ kind: "plain" });
    const prepare = cache.step("SELECT 1");
    expect(prepare).toEqual({ kind: "prepare", name: "stmt_0" });
    cache.prepared("SELECT 1", "stmt_0", [25]);
    expect(cache.step("SELECT 1")).toEqual({ kind: "execute", name: "stmt_0", paramTypes: [25] });
    expect(cache.size).toBe(1);
  });

  it("closes the least recently used statement when full", () => {
    const cache = new StatementCache(2);
    const keep = (text: string) => {
      cache.step(text);
      const step = cache.step(text);
      if (step.kind !== "prepare") throw new Error(`expected prepare for ${text}`);
      cache.prepared(text, step.name, []);
      return step;
    };
    keep("a");
    keep("b");
    cache.step("a"); // a is now the most recently used
    const third = keep("c");
    expect(third.close).toBe("stmt_1"); // b's
    expect(cache.size).toBe(2);
    expect(cache.step("b")).toEqual({ kind: "plain" });
    expect(cache.step("a").kind).toBe("execute");
  });

  it("a text whose preparation failed is prepared again next time, under a new name", () => {
    const cache = new StatementCache(2);
    cache.step("bad");
    expect(cache.step("bad")).toEqual({ kind: "prepare", name: "stmt_0" });
    expect(cache.step("bad")).toEqual({ kind: "prepare", name: "stmt_1" });
  });

  it("a forgotten statement runs plain until seen again", () => {
    const cache = new StatementCache(2);
    cache.step("x");
    cache.step("x");
    cache.prepared("x", "stmt_0", []);
    expect(cache.forget("x")).toBe("stmt_0");
    expect(cache.step("x")).toEqual({ kind: "plain" });
    expect(cache.step("x").kind).toBe("prepare");
  });

  it("remembers a bounded number of texts seen once", () => {
    const cache = new StatementCache(1);
    for (let i = 0; i < 10; i++) cache.step(`once ${i}`);
    // Only the last 4 × capacity one-off texts are remembered.
    expect(cache.step("once 0")).toEqual({ kind: "plain" });
    expect(cache.step("once 9").kind).toBe("prepare");
  });

  it("prepares a statement again under a new name once it has served renewAfter(text) runs", () => {
    const cache = new StatementCache(4, (text) => (text === "renewed" ? 2 : Number.POSITIVE_INFINITY));
    for (const text of ["renewed", "kept"]) {
      cache.step(text);
      const step = cache.step(text);
      if (step.kind !== "prepare") throw new Error("expected prepare");
      cache.prepared(text, step.name, [23]);
    }
    expect(cache.step("renewed")).toEqual({ kind: "execute", name: "stmt_0", paramTypes: [23] });
    expect(cache.step("renewed")).toEqual({ kind: "prepare", name: "stmt_2", close: "stmt_0" });
    cache.prepared("renewed", "stmt_2", [23]);
    expect(cache.step("renewed")).toEqual({ kind: "execute", name: "stmt_2", paramTypes: [23] });
    for (let i = 0; i < 10; i++) expect(cache.step("kept").kind).toBe("execute");
    expect(cache.size).toBe(2);
  });
});

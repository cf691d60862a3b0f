import { describe, expect, it } from "vitest";
import { jobSlots } from "./slots";

const later = () => {
  let resolve!: (value: string) => void;
  const promise = new Promise<string>((r) => {
    resolve = r;
  });
  return { promise, resolve };
};

describe("job slots", () => {
  it("runs at most `concurrency` at once; the rest start as slots free up", async () => {
    const slots = jobSlots(2);
    const gates = [later(), later(), later()];
    const started: number[] = [];
    const runs = gates.map((gate, i) =>
      slots(() => {
        started.push(i);
        return gate.promise;
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    gates[0].resolve("a");
    gates[1].resolve("b");
    gates[2].resolve("c");
    expect(await Promise.all(runs)).toEqual(["a", "b", "c"]);
    expect(started).toEqual([0, 1, 2]);
  });

  it("once closed, work waiting for a slot never starts, and work running ends as it would", async () => {
    const slots = jobSlots(1);
    const running = later();
    const started: string[] = [];
    const first = slots(() => {
      started.push("running");
      return running.promise;
    });
    const waiting = slots(async () => {
      started.push("waiting");
      return "ran";
    });
    await Promise.resolve();
    slots.close();
    running.resolve("done");
    expect(await first).toBe("done");
    expect(await waiting).toBeUndefined();
    expect(await slots(async () => "after")).toBeUndefined();
    expect(started).toEqual(["running"]);
  });
});

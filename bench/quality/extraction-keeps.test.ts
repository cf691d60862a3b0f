import { describe, expect, it } from "vitest";
import { generateFixture, QUICK } from "./fixture";
import { extractionKeepsFact } from "./service";

describe("extractionKeepsFact", () => {
  const ids = generateFixture(42, QUICK).users.flatMap((u) => u.facts.map((f) => f.id));

  it("keeps every fact at 1", () => {
    expect(ids.every((id) => extractionKeepsFact(42, id, 1))).toBe(true);
  });

  it("keeps about the share asked, the same facts on every run, other facts under another seed", () => {
    const kept = ids.filter((id) => extractionKeepsFact(42, id, 0.83));
    expect(kept.length / ids.length).toBeGreaterThan(0.75);
    expect(kept.length / ids.length).toBeLessThan(0.91);
    expect(ids.filter((id) => extractionKeepsFact(42, id, 0.83))).toEqual(kept);
    expect(ids.filter((id) => extractionKeepsFact(7, id, 0.83))).not.toEqual(kept);
  });
});

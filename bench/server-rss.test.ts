import { describe, expect, it } from "vitest";
import { startScriptNodeFlags } from "./server-rss";

describe("the server's Node.js flags", () => {
  it("are the start script's flags before --import", () => {
    expect(startScriptNodeFlags("node --import tsx functions/server.ts")).toEqual([]);
    expect(
      startScriptNodeFlags("node --max-semi-space-size=1 --liftoff-only --import tsx functions/server.ts"),
    ).toEqual(["--max-semi-space-size=1", "--liftoff-only"]);
  });

  it("refuse a start script that does not run node", () => {
    expect(() => startScriptNodeFlags("tsx functions/server.ts")).toThrow(/does not run node/);
  });
});

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { npmStartArgs, REPO_ROOT, startScriptNodeFlags } from "./start-command";

describe("the start command", () => {
  it("reads the Node.js flags of a start script: what comes between node and its entry", () => {
    expect(startScriptNodeFlags("node bin/server.mjs")).toEqual([]);
    expect(startScriptNodeFlags("node --optimize-for-size --liftoff-only bin/server.mjs")).toEqual([
      "--optimize-for-size",
      "--liftoff-only",
    ]);
    expect(startScriptNodeFlags("exec node --liftoff-only bin/server.mjs")).toEqual(["--liftoff-only"]);
    expect(() => startScriptNodeFlags("tsx functions/server.ts")).toThrow(/does not run node/);
    expect(() => startScriptNodeFlags("exec node")).toThrow(/does not run node/);
  });

  it("is package.json's start script without its leading node", () => {
    const pkg = JSON.parse(readFileSync(`${REPO_ROOT}/package.json`, "utf8")) as { scripts: { start: string } };
    expect(["exec", "node", ...npmStartArgs()].join(" ")).toBe(pkg.scripts.start);
  });
});

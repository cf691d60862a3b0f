import { describe, expect, it } from "vitest";
import { PGLITE_DEFAULT_START_PARAMS, pgliteStartParams } from "./pglite-durability";

describe("pgliteStartParams", () => {
  it("knows PGlite's defaults, which turn fsync off", () => {
    expect(PGLITE_DEFAULT_START_PARAMS).toContain("--single");
    expect(PGLITE_DEFAULT_START_PARAMS).toContain("-F");
  });
  it("full: drops -F and flushes the WAL with fsync(), the call the host hook sees", () => {
    const params = pgliteStartParams("full", PGLITE_DEFAULT_START_PARAMS);
    expect(params).not.toContain("-F");
    expect(params.join(" ")).toContain("-c fsync=on");
    expect(params.join(" ")).toContain("-c wal_sync_method=fsync");
    // Everything else PGlite needs stays.
    for (const p of PGLITE_DEFAULT_START_PARAMS.filter((p) => p !== "-F")) expect(params).toContain(p);
  });
  it("fast: PGlite's defaults as they are", () => {
    expect(pgliteStartParams("fast", PGLITE_DEFAULT_START_PARAMS)).toEqual([...PGLITE_DEFAULT_START_PARAMS]);
  });
});

import ConnectionParameters from "pg/lib/connection-parameters";
import { describe, expect, it } from "vitest";
import { pgPoolConfig } from "./pg";

/**
 * What node-postgres sends the server at connect. Measured against a Postgres server (no server
 * runs in CI): with JIT on, recall without a query at a million facts took 64 ms p50, ~50 of it
 * compiling; 5 ms with it off (bench/RESULTS.md, midday of 2026-11-27).
 */
describe("the node-postgres pool", () => {
  it("turns JIT off in every connection's startup options, beside the URL's own parameters", () => {
    const params = new ConnectionParameters(
      pgPoolConfig("postgres://svc:secret@db.internal:6543/memory?sslmode=disable"),
    );
    expect(params.options).toBe("-c jit=off");
    expect(params).toMatchObject({ host: "db.internal", port: 6543, database: "memory", user: "svc" });
  });

  it("leaves a URL's own startup options in charge (the operator's choice, JIT included)", () => {
    const params = new ConnectionParameters(pgPoolConfig("postgres://svc@db/memory?options=-c%20search_path%3Dmem"));
    expect(params.options).toBe("-c search_path=mem");
  });
});

import ConnectionParameters from "pg/lib/connection-parameters";
import { describe, expect, it } from "vitest";
import { pgPoolConfig } from "./pg";

/**
 * What node-postgres sends the server at connect. Nothing of the service's own in the startup
 * packet: a pooler (PgBouncer, a managed service's pooler) refuses startup options it does not track,
 * so JIT is turned off for the database by migration 0021 instead (tests/db/pooler.test.ts
 * checks a new session on a real server).
 */
describe("the node-postgres pool", () => {
  it("sends the URL's parameters and no startup options of its own", () => {
    const params = new ConnectionParameters(
      pgPoolConfig("postgres://svc:secret@db.internal:6543/memory?sslmode=disable"),
    );
    expect(params.options).toBeUndefined();
    expect(params).toMatchObject({ host: "db.internal", port: 6543, database: "memory", user: "svc" });
  });

  it("passes a URL's own startup options (the operator's choice, JIT included)", () => {
    const params = new ConnectionParameters(pgPoolConfig("postgres://svc@db/memory?options=-c%20search_path%3Dmem"));
    expect(params.options).toBe("-c search_path=mem");
  });
});

import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { constantSql } from "./constant-sql";
import { facts } from "./schema";
import { compiled } from "./types";

describe("constantSql", () => {
  it("renders as the fragment it was built from, building it once per key", () => {
    let builds = 0;
    const build = () => {
      builds++;
      return sql`SELECT ${facts.id} FROM ${facts} WHERE ${facts.confidence} >= (SELECT min_conf FROM s)`;
    };
    const first = compiled(sql`WITH x AS (${constantSql("test: facts above the floor", build)}) SELECT 1`);
    const again = compiled(sql`WITH x AS (${constantSql("test: facts above the floor", build)}) SELECT 1`);
    expect(first).toEqual(compiled(sql`WITH x AS (${build()}) SELECT 1`));
    expect(again).toEqual(first);
    expect(builds).toBe(2); // once kept, once for the comparison above
  });

  it("refuses a fragment with a parameter: its value would be kept in the text", () => {
    expect(() => constantSql("test: a parameter", () => sql`SELECT ${"prj_1"}::text`)).toThrow(/parameters/);
  });

  it("keeps the parameters around it numbered in order", () => {
    const constant = constantSql("test: between parameters", () => sql`lower(${facts.object})`);
    expect(compiled(sql`SELECT ${1}::int, ${constant}, ${"a"}::text`)).toMatchObject({
      sql: `SELECT $1::int, lower("facts"."object"), $2::text`,
      params: [1, "a"],
    });
  });
});

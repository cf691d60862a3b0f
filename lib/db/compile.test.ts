import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { compileFast, withFastCompile } from "./compile";
import { messages, threads } from "./schema";

const dialect = new PgDialect();
const hooks = dialect as unknown as Parameters<typeof compileFast>[1];

describe("compileFast", () => {
  it("renders nested fragments, tables, columns, identifiers, lists and values as drizzle does", () => {
    const inner = sql`${threads.id} = ${"thr_1"} AND ${sql.identifier("x")}."y" IN ${["a", "b"]}`;
    const query = sql`SELECT ${messages.content}, ${sql.raw("1")} FROM ${messages} JOIN ${threads} ON ${inner}
      WHERE ${messages.createdAt} > ${new Date(0)} AND metadata @> ${JSON.stringify({ a: 1 })}::jsonb
      AND ${null}::text IS NULL AND ${undefined} ${sql.join([sql`${1}`, sql`${2.5}`], sql`, `)} ${true}`;
    const fast = compileFast(query, hooks);
    expect(fast).toEqual(dialect.sqlToQuery(query));
    expect(fast?.sql).toContain('"threads"."id" = $1 AND "x"."y" IN ($2, $3)');
    expect(fast?.params).toEqual(["thr_1", "a", "b", new Date(0), '{"a":1}', null, 1, 2.5, true]);
  });

  it("leaves to drizzle what it does not render: placeholders, inlined parameters, subqueries", () => {
    expect(compileFast(sql`SELECT ${sql.placeholder("p")}`, hooks)).toBeUndefined();
    expect(compileFast(sql`SELECT ${"a"}`.inlineParams(), hooks)).toBeUndefined();
    expect(compileFast(sql`SELECT ${sql`${"a"}`.inlineParams()}`, hooks)).toBeUndefined();
  });

  it("renders the same through an installed dialect; with the check, a difference throws", () => {
    const db = { dialect: new PgDialect() };
    withFastCompile(db, true);
    const query = sql`SELECT ${threads.id} FROM ${threads} WHERE ${threads.projectId} = ${"prj"}`;
    expect(db.dialect.sqlToQuery(query)).toEqual(new PgDialect().sqlToQuery(query));

    // A dialect whose own rendering is not what compileFast renders.
    const real = new PgDialect();
    const odd = Object.assign(Object.create(real), { sqlToQuery: () => ({ sql: "SELECT 2", params: [] }) });
    withFastCompile({ dialect: odd }, true);
    expect(() => odd.sqlToQuery(sql`SELECT 1`)).toThrow(/renders differently from drizzle/);
    // Without the check, compileFast's rendering is the one sent.
    const unchecked = Object.assign(Object.create(real), { sqlToQuery: () => ({ sql: "SELECT 2", params: [] }) });
    withFastCompile({ dialect: unchecked }, false);
    expect(unchecked.sqlToQuery(sql`SELECT 1`).sql).toBe("SELECT 1");
    // What it declines is drizzle's to render.
    expect(unchecked.sqlToQuery(sql`SELECT ${sql.placeholder("p")}`).sql).toBe("SELECT 2");
  });
});

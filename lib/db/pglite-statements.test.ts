import { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { preparedQuery, type QueryFn } from "./pglite-statements";
import { StatementCache } from "./statement-cache";

/** The named statements the session holds (Postgres's own view of them). */
async function preparedNames(client: PGlite): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY name");
  return rows.map((r) => r.name);
}

describe("preparedQuery on the embedded database", () => {
  let client: PGlite;
  let query: QueryFn;
  beforeAll(async () => {
    client = await PGlite.create();
    await client.exec("CREATE TABLE t (id int PRIMARY KEY, note text, at timestamptz, tags jsonb)");
    query = preparedQuery(client, new StatementCache(2));
  });
  afterAll(() => client.close());

  it("returns what PGlite's query returns, as a named statement from the second call", async () => {
    const insert = "INSERT INTO t (id, note, at, tags) VALUES ($1, $2, $3, $4) RETURNING *";
    const at = new Date("2026-01-02T03:04:05Z");
    await query(insert, [1, "one", at, { a: [1] }]);
    expect(await preparedNames(client)).toEqual([]);
    const second = await query(insert, [2, null, at, ["x"]]);
    expect(await preparedNames(client)).toEqual(["stmt_0"]);
    const third = await query(insert, [3, "three", at.toISOString(), { b: true }]);
    expect(second.rows).toEqual([{ id: 2, note: null, at, tags: ["x"] }]);
    expect(third.rows).toEqual([{ id: 3, note: "three", at, tags: { b: true } }]);
    expect(third.fields.map((f) => f.name)).toEqual(["id", "note", "at", "tags"]);
    const select = "SELECT id, note FROM t WHERE id >= $1 ORDER BY id";
    const plain = await client.query(select, [2], { rowMode: "array" });
    await query(select, [2], { rowMode: "array" });
    expect((await query(select, [2], { rowMode: "array" })).rows).toEqual(plain.rows);
  });

  it("a failing call throws Postgres's error with its code, and the statement stays usable", async () => {
    const insert = "INSERT INTO t (id, note) VALUES ($1, $2)";
    await query(insert, [10, "a"]);
    await query(insert, [11, "b"]);
    const err = await query(insert, [10, "again"]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "23505", query: insert });
    await query(insert, [12, "c"]);
    expect((await client.query("SELECT count(*)::int AS n FROM t WHERE id >= 10")).rows).toEqual([{ n: 3 }]);
  });

  it("keeps at most its capacity of statements, closing the least recently used", async () => {
    for (const k of [1, 2, 3]) {
      const text = `SELECT ${k} AS k, $1::int AS v`;
      await query(text, [k]);
      expect((await query(text, [k])).rows).toEqual([{ k, v: k }]);
    }
    expect((await preparedNames(client)).length).toBe(2);
  });

  it("a statement whose result columns changed under it runs plain instead of failing", async () => {
    const text = "SELECT * FROM t WHERE id = $1";
    await query(text, [1]);
    await query(text, [1]);
    await client.exec("ALTER TABLE t ADD COLUMN extra int DEFAULT 7");
    const { rows } = await query<{ extra: number }>(text, [1]);
    expect(rows[0]?.extra).toBe(7);
  });

  it("concurrent calls each get their own result", async () => {
    const text = "SELECT $1::int * 2 AS twice";
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => query<{ twice: number }>(text, [i])));
    expect(results.map((r) => r.rows[0]?.twice)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
  });

  it("does not run inside another caller's transaction", async () => {
    const text = "SELECT count(*)::int AS n FROM t WHERE id = $1";
    await query(text, [99]);
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tx = client.transaction(async (t) => {
      await t.query("INSERT INTO t (id) VALUES (99)");
      await held;
      await t.rollback();
    });
    const outside = query<{ n: number }>(text, [99]);
    release();
    await tx;
    expect((await outside).rows).toEqual([{ n: 0 }]);
  });
});

import { PGlite, types } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GENERIC_PLAN_HINT } from "./generic-plan";
import { preparedQuery, type QueryFn } from "./pglite-statements";
import { StatementCache } from "./statement-cache";
import { VectorValue } from "./vectors";

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

  it("a call's own parsers win over the database's for their types, the database's parse the rest", async () => {
    // As drizzle calls it: timestamps kept as text, every other type parsed by PGlite.
    const options = { parsers: { [types.TIMESTAMPTZ]: (value: string) => `as text: ${value}` } };
    const select = "SELECT at, tags, id FROM t WHERE id = $1";
    const plain = await client.query(select, [1], options);
    await query(select, [1], options);
    const named = await query(select, [1], options);
    const { rows } = await client.query("SELECT 1 FROM pg_prepared_statements WHERE statement = $1", [select]);
    expect(rows).toHaveLength(1); // the second and third calls ran it as a named statement
    expect(named.rows).toEqual(plain.rows);
    expect(named.rows).toEqual([{ at: "as text: 2026-01-02 03:04:05+00", tags: { a: [1] }, id: 1 }]);
    // The next call without them gets the database's parser again.
    expect((await query(select, [1])).rows[0]).toMatchObject({ at: new Date("2026-01-02T03:04:05Z") });
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

describe("preparedQuery with a statement marked for its generic plan", () => {
  let client: PGlite;
  let query: QueryFn;
  const RENEW_AFTER = 3;
  beforeAll(async () => {
    client = await PGlite.create();
    await client.exec("CREATE TABLE g (id int PRIMARY KEY, kind int)");
    await client.exec("INSERT INTO g SELECT i, i % 5 FROM generate_series(1, 200) i");
    query = preparedQuery(
      client,
      new StatementCache(4, (text) => (text.startsWith(GENERIC_PLAN_HINT) ? RENEW_AFTER : Number.POSITIVE_INFINITY)),
    );
  });
  afterAll(() => client.close());

  const plans = async () =>
    (
      await client.query<{ name: string; generic: number; custom: number; marked: boolean }>(
        `SELECT name, generic_plans::int AS generic, custom_plans::int AS custom,
          statement LIKE '${GENERIC_PLAN_HINT.trim()}%' AS marked FROM pg_prepared_statements ORDER BY name`,
      )
    ).rows;
  const planCacheMode = async () =>
    (await client.query<{ plan_cache_mode: string }>("SHOW plan_cache_mode")).rows[0]?.plan_cache_mode;

  it("runs it with Postgres's generic plan, the others with custom plans, and leaves the setting as it was", async () => {
    const marked = `${GENERIC_PLAN_HINT}SELECT count(*)::int AS n FROM g WHERE kind = $1`;
    const unmarked = "SELECT count(*)::int AS n FROM g WHERE kind = $1 AND id > 0";
    for (const kind of [0, 1, 2]) {
      expect((await query(marked, [kind])).rows).toEqual([{ n: 40 }]);
      expect((await query(unmarked, [kind])).rows).toEqual([{ n: 40 }]);
    }
    expect(await plans()).toEqual([
      { name: "stmt_0", generic: 2, custom: 0, marked: true },
      { name: "stmt_1", generic: 0, custom: 2, marked: false },
    ]);
    expect(await planCacheMode()).toBe("auto");
  });

  it("prepares it again (a plan made anew) after its runs, closing the old one", async () => {
    const marked = `${GENERIC_PLAN_HINT}SELECT id FROM g WHERE id = $1`;
    const names = new Set<string>();
    for (let id = 1; id <= 2 + RENEW_AFTER * 2; id++) {
      expect((await query(marked, [id])).rows).toEqual([{ id }]);
      for (const p of (await plans()).filter((p) => p.marked && p.name !== "stmt_0")) names.add(p.name);
    }
    // Prepared on the 2nd run, renewed after every RENEW_AFTER runs: three names, one kept at a time.
    expect([...names]).toEqual(["stmt_2", "stmt_3", "stmt_4"]);
    expect((await plans()).filter((p) => p.marked).map((p) => p.name)).toEqual(["stmt_0", "stmt_4"]);
  });

  it("a failing call still puts the setting back", async () => {
    const marked = `${GENERIC_PLAN_HINT}SELECT 1 / $1::int AS x`;
    await query(marked, [1]);
    await query(marked, [1]);
    await expect(query(marked, [0])).rejects.toMatchObject({ code: "22012" });
    expect(await planCacheMode()).toBe("auto");
    expect((await query(marked, [2])).rows).toEqual([{ x: 0 }]);
  });
});

describe("preparedQuery sends halfvec parameters in binary", () => {
  let client: PGlite;
  let query: QueryFn;
  beforeAll(async () => {
    client = await PGlite.create({ extensions: { vector } });
    await client.exec("CREATE EXTENSION vector");
    query = preparedQuery(client, new StatementCache(4));
  });
  afterAll(() => client.close());

  /** A deterministic pseudo-random double in [-scale, scale). */
  function numbers(count: number, seed: number, scale: number): number[] {
    let state = seed;
    return Array.from({ length: count }, () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return (state / 2 ** 31 - 0.5) * 2 * scale;
    });
  }

  it("stores exactly what pgvector's text parser stores, edge values included", async () => {
    const text = "SELECT $1::halfvec::text AS v, $1::halfvec = $2::halfvec AS same";
    const edges = [0, -0, 1, -1, 65504, 65519, 2 ** -14, 2 ** -24, 2 ** -25, 1.5 * 2 ** -24, 1 + 2 ** -11];
    const vectors = [
      edges,
      numbers(1536, 7, 1),
      numbers(1536, 8, 1e-4),
      numbers(256, 9, 60000),
      numbers(512, 10, 1e-7),
      numbers(300, 11, 1)
        .map((x) => x.toPrecision(7))
        .map(Number),
    ];
    await query(text, ["[1]", "[1]"]); // the next calls of this text run named, in binary
    for (const v of vectors) {
      const literal = `[${v.join(",")}]`;
      const plain = await client.query<{ v: string }>("SELECT $1::halfvec::text AS v", [literal]);
      const named = await query<{ v: string; same: boolean }>(text, [literal, literal]);
      expect(named.rows[0]?.v).toBe(plain.rows[0]?.v);
      expect(named.rows[0]?.same).toBe(true);
    }
  });

  it("a VectorValue goes in binary from its numbers and stores what its text stores", async () => {
    let written = 0;
    class Counted extends VectorValue {
      override toString() {
        written++;
        return super.toString();
      }
    }
    const text = "SELECT $1::halfvec::text AS v";
    await query(text, [new Counted([1])]); // the first call runs plain: PGlite writes the text
    written = 0;
    for (const v of [numbers(256, 12, 1), numbers(1536, 13, 1e-3), [0, -0, 65504, 2 ** -24]]) {
      const plain = await client.query<{ v: string }>(text, [`[${v.join(",")}]`]);
      const named = await query<{ v: string }>(text, [new Counted(v)]);
      expect(named.rows[0]?.v).toBe(plain.rows[0]?.v);
    }
    expect(written).toBe(0);
    // What the binary form refuses is sent as its text, for Postgres's own error.
    const err = await query(text, [new Counted([Number.NaN])]).catch((e: Error) => e.message);
    expect(String(err)).toContain("NaN not allowed in halfvec");
    expect(written).toBe(1);
  });

  it("a value the binary form refuses reaches Postgres as text and gets Postgres's own error", async () => {
    const text = "SELECT vector_dims($1::halfvec(3)) AS d";
    await query(text, ["[1,2,3]"]);
    expect((await query(text, ["[1,2,3]"])).rows).toEqual([{ d: 3 }]);
    for (const [value, message] of [
      ["[1,NaN,3]", "NaN not allowed in halfvec"],
      ["[1,2,70000]", "out of range"],
      ["[1,2]", "expected 3 dimensions, not 2"],
    ]) {
      const plain = await client.query(text, [value]).catch((e: Error) => e.message);
      const named = await query(text, [value]).catch((e: Error) => e.message);
      expect(named).toBe(plain);
      expect(String(named)).toContain(message);
    }
  });
});

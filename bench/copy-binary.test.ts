import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyBinary } from "./copy-binary";

let db: PGlite;
beforeAll(async () => {
  db = await PGlite.create({ extensions: { vector } });
  await db.exec(
    "CREATE EXTENSION vector; CREATE TABLE t (id text, name text, confidence real, at timestamptz, embedding halfvec)",
  );
});
afterAll(() => db.close());

describe("copyBinary: rows for a binary COPY", () => {
  it("loads the same values as the text forms would", async () => {
    const at = new Date("2025-03-04T05:06:07.891Z");
    const embedding = [0.1, -0.25, 1 / 3, 0, -0, 65504, 2 ** -24, -0.999];
    const blob = new Blob([
      copyBinary([
        [{ text: "a" }, { text: 'naïve, "quoted"\nline' }, { real: 0.9 }, { timestamptz: at }, { halfvec: embedding }],
        [
          { text: "b" },
          { text: "" },
          { real: -1.5 },
          { timestamptz: new Date("1999-12-31T23:59:59Z") },
          { halfvec: [1] },
        ],
      ]),
    ]);
    await db.query("COPY t FROM '/dev/blob' WITH (FORMAT binary)", [], { blob });
    const { rows } = await db.query<Record<string, unknown>>(
      `SELECT id, name, confidence = 0.9::real AS same_confidence, confidence::text AS confidence, at,
        embedding = $1::halfvec AS same_embedding FROM t ORDER BY id`,
      [`[${embedding.join(",")}]`],
    );
    expect(rows[0]).toMatchObject({
      id: "a",
      name: 'naïve, "quoted"\nline',
      same_confidence: true,
      at,
      same_embedding: true,
    });
    expect(rows[1]).toMatchObject({ id: "b", name: "", confidence: "-1.5", at: new Date("1999-12-31T23:59:59Z") });
  });

  it("refuses a number half precision cannot hold", () => {
    expect(() => copyBinary([[{ halfvec: [70000] }]])).toThrow("not a half-precision number: 70000");
  });
});

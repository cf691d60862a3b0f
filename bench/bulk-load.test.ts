import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bulkLoadPlan } from "./bulk-load";

let db: PGlite;
beforeEach(async () => {
  db = await PGlite.create({ extensions: { vector } });
  await db.exec(`
    CREATE EXTENSION vector;
    CREATE TABLE owners (id text PRIMARY KEY);
    CREATE TABLE items (
      id text CONSTRAINT "items key" PRIMARY KEY,
      owner_id text NOT NULL REFERENCES owners (id) ON DELETE CASCADE,
      name text NOT NULL UNIQUE,
      body tsvector,
      embedding vector(3));
    CREATE INDEX items_owner_idx ON items (owner_id, name) WHERE name <> '';
    CREATE INDEX items_body_idx ON items USING gin (body) WITH (gin_pending_list_limit = 64);
    CREATE INDEX items_embedding_idx ON items USING hnsw (embedding vector_cosine_ops);
    CREATE TABLE links (
      item_id text NOT NULL REFERENCES items (id) ON DELETE CASCADE,
      tag text NOT NULL,
      PRIMARY KEY (item_id, tag));
    INSERT INTO owners VALUES ('o1');
  `);
});
afterEach(() => db.close());

/** Every index and constraint on the tables, as Postgres itself prints them. */
async function schemaOf() {
  const { rows: indexes } = await db.query<{ def: string }>(
    `SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index
      WHERE indrelid IN ('items'::regclass, 'links'::regclass) ORDER BY 1`,
  );
  const { rows: constraints } = await db.query<{ def: string }>(
    `SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid IN ('items'::regclass, 'links'::regclass) ORDER BY 1`,
  );
  return [...indexes, ...constraints].map((r) => r.def);
}

const run = async (statements: string[]) => {
  for (const statement of statements) await db.query(statement);
};

describe("bulkLoadPlan: indexes and keys dropped for a load and made again after it", () => {
  it("drops the keys and indexes (but the kept access method's and the unique constraint's) and makes them again as they were", async () => {
    const before = await schemaOf();
    const plan = await bulkLoadPlan(db, ["items", "links"], ["hnsw"]);
    await run(plan.drop);
    const during = await schemaOf();
    expect(during.join("\n")).not.toMatch(/items_owner_idx|items_body_idx|FOREIGN KEY|PRIMARY KEY/);
    expect(during.join("\n")).toMatch(/items_embedding_idx/);
    expect(during.join("\n")).toMatch(/items_name_key/);
    await db.exec(`INSERT INTO items (id, owner_id, name, body) VALUES ('i1', 'o1', 'one', to_tsvector('simple', 'one'));
      INSERT INTO links VALUES ('i1', 'a'), ('i1', 'b');`);
    await run(plan.restore);
    expect(await schemaOf()).toEqual(before);
    // The foreign keys work again: deleting the owner cascades through both tables.
    await db.exec("DELETE FROM owners");
    expect((await db.query("SELECT * FROM links")).rows).toEqual([]);
  });

  it("fails the restore when the load wrote a row a key forbids", async () => {
    const plan = await bulkLoadPlan(db, ["items", "links"], ["hnsw"]);
    await run(plan.drop);
    await db.exec(`INSERT INTO items (id, owner_id, name) VALUES ('i1', 'o1', 'one');
      INSERT INTO links VALUES ('no such item', 'a');`);
    await expect(run(plan.restore)).rejects.toThrow(/links_item_id_fkey/);
  });

  it("fails the restore when the load wrote a duplicate primary key", async () => {
    const plan = await bulkLoadPlan(db, ["items", "links"], ["hnsw"]);
    await run(plan.drop);
    await db.exec(`INSERT INTO links VALUES ('i1', 'a'), ('i1', 'a')`);
    await expect(run(plan.restore)).rejects.toThrow(/could not create unique index "links_pkey"/);
  });
});

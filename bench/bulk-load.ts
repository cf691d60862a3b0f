/**
 * Loading rows in bulk the way Postgres's manual advises ("Populating a Database"): drop the
 * tables' indexes and foreign keys, load, then make them again. A B-tree or GIN index built over
 * a million sorted rows costs a fraction of a million single inserts into it, and a foreign key
 * added after the load checks every row in one join instead of one lookup per row. The DDL that
 * makes them again is Postgres's own (`pg_get_indexdef`, `pg_get_constraintdef`), so what comes
 * back is what was there; the keys are validated when they are added again, so a row the load
 * should not have accepted fails the load instead of slipping in.
 */

/** What bulkLoadPlan needs of a database: run a query with parameters and get its rows. */
export interface Queryable {
  query<T>(text: string, params?: unknown[]): Promise<{ rows: T[] }>;
}

export interface BulkLoadPlan {
  /** Statements to run before the load, in order. */
  drop: string[];
  /** Statements that make it all again after the load, in order. */
  restore: string[];
}

interface Constraint {
  kind: "p" | "f";
  table: string;
  name: string;
  definition: string;
}

interface Index {
  schema: string;
  name: string;
  definition: string;
}

const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The plan for loading into `tables`: their foreign keys (and those pointing at them from other
 * tables), their primary keys, and their other indexes, except those built with an access
 * method in `keepMethods` (the bench builds its HNSW indexes itself, with their own memory).
 * Unique and exclusion constraints other than the primary key stay: they guard what the load
 * itself writes.
 */
export async function bulkLoadPlan(db: Queryable, tables: string[], keepMethods: string[] = []): Promise<BulkLoadPlan> {
  const { rows: constraints } = await db.query<Constraint>(
    `SELECT contype AS kind, conrelid::regclass::text AS table, conname AS name,
        pg_get_constraintdef(oid) AS definition
       FROM pg_constraint
      WHERE (contype = 'f' AND (conrelid = ANY($1::text[]::regclass[]) OR confrelid = ANY($1::text[]::regclass[])))
         OR (contype = 'p' AND conrelid = ANY($1::text[]::regclass[]))
      ORDER BY conrelid::regclass::text, conname`,
    [tables],
  );
  const { rows: indexes } = await db.query<Index>(
    `SELECT n.nspname AS schema, c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_am am ON am.oid = c.relam
      WHERE i.indrelid = ANY($1::text[]::regclass[])
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
        AND am.amname <> ALL($2::text[])
      ORDER BY c.relname`,
    [tables, keepMethods],
  );
  const foreignKeys = constraints.filter((c) => c.kind === "f");
  const primaryKeys = constraints.filter((c) => c.kind === "p");
  const alter = (c: Constraint) => `ALTER TABLE ${c.table} `;
  return {
    drop: [
      ...foreignKeys.map((c) => `${alter(c)}DROP CONSTRAINT ${quoted(c.name)}`),
      ...primaryKeys.map((c) => `${alter(c)}DROP CONSTRAINT ${quoted(c.name)}`),
      ...indexes.map((i) => `DROP INDEX ${quoted(i.schema)}.${quoted(i.name)}`),
    ],
    restore: [
      ...indexes.map((i) => i.definition),
      ...primaryKeys.map((c) => `${alter(c)}ADD CONSTRAINT ${quoted(c.name)} ${c.definition}`),
      ...foreignKeys.map((c) => `${alter(c)}ADD CONSTRAINT ${quoted(c.name)} ${c.definition}`),
    ],
  };
}

import {
  Column,
  entityKind,
  Name,
  Param,
  Placeholder,
  type QueryWithTypings,
  SQL,
  StringChunk,
  Table,
} from "drizzle-orm";
import type { PgDialect } from "drizzle-orm/pg-core";

/** What PgDialect.sqlToQuery returns: text with $n placeholders, its parameters and their typings. */
type CompiledQuery = QueryWithTypings;
type Typing = NonNullable<QueryWithTypings["typings"]>[number];
type Output = { sql: string; params: unknown[]; typings: Typing[] };

/** drizzle's own symbols for a table's schema, name and alias mark (drizzle-orm/table.js). */
const TABLE_SCHEMA = Symbol.for("drizzle:Schema");
const TABLE_NAME = Symbol.for("drizzle:Name");
const IS_ALIAS = Symbol.for("drizzle:IsAlias");

/** SQL's inline-params flag, private in drizzle's types (set by sql.raw's callers via inlineParams()). */
const inlinesParams = (query: SQL) => (query as unknown as { shouldInlineParams: boolean }).shouldInlineParams;

type DialectHooks = Pick<PgDialect, "escapeName" | "escapeParam" | "prepareTyping"> & {
  casing: { getColumnCasing(column: Column): string };
};

/** Thrown inside compileFast when a chunk is of a kind it leaves to drizzle. */
const UNSUPPORTED = Symbol("unsupported chunk");

/**
 * drizzle's own rendering of an SQL tree, for the chunk kinds this service's statements are made
 * of (text, nested SQL, identifiers, tables, columns, values, parameters), in one pass that
 * appends to one string; undefined when the tree holds anything else (a subquery, an alias, a
 * placeholder, an enum, inlined parameters), which drizzle then renders as usual.
 *
 * Why: drizzle renders each nested fragment into its own string and parameter list, merged at
 * every level, and tests each chunk against a dozen entity classes by walking its prototype
 * chain. Add message's statement (5.5 KB of text, thousands of chunks) took ~0.4 ms to render,
 * more than a seventh of the whole request (bench/RESULTS.md). The output is the same, text,
 * parameters and typings: tests compare the two on every statement the test suite sends
 * (withFastCompile's check, SQL_COMPILE_CHECK=1).
 */
export function compileFast(query: SQL, dialect: DialectHooks): CompiledQuery | undefined {
  const out: Output = { sql: "", params: [], typings: [] };
  try {
    if (inlinesParams(query)) return undefined;
    appendChunks(query.queryChunks, dialect, out);
  } catch (err) {
    if (err === UNSUPPORTED) return undefined;
    throw err;
  }
  return out.params.length > 0 ? out : { sql: out.sql, params: out.params };
}

function appendChunks(chunks: unknown[], dialect: DialectHooks, out: Output): void {
  for (const chunk of chunks) {
    if (chunk instanceof StringChunk) {
      out.sql += chunk.value.length === 1 ? chunk.value[0] : chunk.value.join("");
    } else if (chunk instanceof SQL) {
      if (inlinesParams(chunk)) throw UNSUPPORTED;
      appendChunks(chunk.queryChunks, dialect, out);
    } else if (chunk === undefined) {
      // drizzle renders a missing chunk as nothing
    } else if (chunk === null || (typeof chunk !== "object" && typeof chunk !== "function")) {
      appendValue(chunk, "none", dialect, out);
    } else if (Array.isArray(chunk)) {
      const list: unknown[] = [new StringChunk("(")];
      chunk.forEach((item, i) => {
        list.push(item);
        if (i < chunk.length - 1) list.push(new StringChunk(", "));
      });
      list.push(new StringChunk(")"));
      appendChunks(list, dialect, out);
    } else if (chunk instanceof Name) {
      out.sql += dialect.escapeName(chunk.value);
    } else if (chunk instanceof Table) {
      out.sql += tableName(chunk, dialect);
    } else if (chunk instanceof Column) {
      out.sql += `${tableName(chunk.table as Table, dialect)}.${dialect.escapeName(dialect.casing.getColumnCasing(chunk))}`;
    } else if (chunk instanceof Param) {
      if (chunk.value instanceof Placeholder) throw UNSUPPORTED;
      const mapped = chunk.value === null ? null : chunk.encoder.mapToDriverValue(chunk.value);
      if (mapped instanceof SQL) appendChunks([mapped], dialect, out);
      else appendValue(mapped, dialect.prepareTyping ? dialect.prepareTyping(chunk.encoder) : "none", dialect, out);
    } else if (typeof chunk === "function" || isEntityOrWrapper(chunk)) {
      throw UNSUPPORTED; // an enum, a subquery, an alias, a view, a placeholder: drizzle's to render
    } else {
      appendValue(chunk, "none", dialect, out); // any other object is a value (JSON, a Date, a vector)
    }
  }
}

function appendValue(value: unknown, typing: Typing, dialect: DialectHooks, out: Output): void {
  out.sql += dialect.escapeParam(out.params.length);
  out.params.push(value);
  out.typings.push(typing);
}

/** A table's name as drizzle writes it, alone or before a column's: schema-qualified unless aliased. */
function tableName(table: Table, dialect: DialectHooks): string {
  const t = table as unknown as Record<symbol, unknown>;
  const schema = t[TABLE_SCHEMA] as string | undefined;
  const name = dialect.escapeName(t[TABLE_NAME] as string);
  return schema === undefined || t[IS_ALIAS] ? name : `${dialect.escapeName(schema)}.${name}`;
}

/** A drizzle entity (of any copy of drizzle) or an object that renders itself as SQL. */
function isEntityOrWrapper(chunk: object): boolean {
  const ctor = (chunk as { constructor?: unknown }).constructor;
  return (
    (typeof ctor === "function" && entityKind in ctor) || typeof (chunk as { getSQL?: unknown }).getSQL === "function"
  );
}

/**
 * `db` (a drizzle instance), its dialect rendering statements with compileFast, drizzle's own
 * rendering where it declines. With SQL_COMPILE_CHECK=1 in the environment (the test suite sets
 * it: vitest.config.ts), every statement is rendered both ways and a difference throws.
 */
export function withFastCompile<T extends object>(db: T, check = compileCheckOn()): T {
  const dialect = (db as unknown as { dialect: PgDialect }).dialect;
  const drizzleToQuery = dialect.sqlToQuery.bind(dialect);
  const hooks = dialect as unknown as DialectHooks;
  dialect.sqlToQuery = (query: SQL, invokeSource?: "indexes") => {
    const fast = invokeSource ? undefined : compileFast(query, hooks);
    if (!fast) return drizzleToQuery(query, invokeSource);
    if (check) assertSameQuery(fast, drizzleToQuery(query, invokeSource));
    return fast;
  };
  return db;
}

function compileCheckOn(): boolean {
  return (
    (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.SQL_COMPILE_CHECK === "1"
  );
}

function assertSameQuery(fast: CompiledQuery, drizzle: CompiledQuery): void {
  const same =
    fast.sql === drizzle.sql &&
    fast.params.length === drizzle.params.length &&
    fast.params.every((p, i) => p === drizzle.params[i]) &&
    (fast.typings ?? []).join() === (drizzle.typings ?? []).join();
  if (!same) throw new Error(`compileFast renders differently from drizzle:\n${fast.sql}\n---\n${drizzle.sql}`);
}

import { type SQL, sql } from "drizzle-orm";
import { compiled } from "./types";

const fragments = new Map<string, SQL>();

/**
 * A fragment without parameters (a setting's CASE expression, a CTE over the statement's own
 * names), compiled to its text once and reused as raw SQL. drizzle walks every chunk of a
 * statement each time it renders it: recall's statement has thousands, and building and
 * rendering it took about half as long as the bare HNSW statement runs (issue 34). `key` names the
 * fragment's shape: the same key must always build the same text. A fragment with parameters is
 * refused (its values would be frozen into the text).
 */
export function constantSql(key: string, build: () => SQL): SQL {
  let fragment = fragments.get(key);
  if (!fragment) {
    const { sql: text, params } = compiled(build());
    if (params.length > 0) throw new Error(`constantSql(${key}): a fragment with parameters cannot be kept as text`);
    fragment = sql.raw(text);
    fragments.set(key, fragment);
  }
  return fragment;
}

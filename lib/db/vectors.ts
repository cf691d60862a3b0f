import { type SQL, sql } from "drizzle-orm";
import type { ProjectRef } from "./types";
import { vectorIndexKind } from "./vector-indexes";

/**
 * A vector as a statement's parameter: its numbers, written in pgvector's text form only when a
 * driver asks for text (node-postgres and Neon's driver through `toPostgres`, PGlite's own query
 * through `toString`). The embedded database's named statements send it in binary straight from
 * the numbers (lib/db/pglite-statements.ts): writing 256 new doubles as text took ~0.3 ms of a
 * recall (V8's shortest round-trip formatting, ~1 µs a number), and parsing them back for the
 * binary form more (issue 34).
 */
export class VectorValue {
  #text: string | undefined;
  constructor(readonly values: readonly number[]) {}
  toString(): string {
    this.#text ??= `[${this.values.join(",")}]`;
    return this.#text;
  }
  toPostgres(): string {
    return this.toString();
  }
  toJSON(): string {
    return this.toString();
  }
}

/** A vector parameter (pgvector's text form to a driver that sends text), at the columns' half precision. */
export function vectorParam(vector: number[]): SQL {
  return sql`${new VectorValue(vector)}::halfvec`;
}

/**
 * The cosine distance of a stored (half-precision) vector to a query, computed in single
 * precision: casting the stored vector to `vector` and taking a `vector` distance costs half a
 * `halfvec` distance in the embedded database's WASM (1536 dims: 5.3 against 11 µs; see
 * VectorIndexKind), and the casts are exact. `dims` must be the row's size (guard the rows).
 */
export function cosineDistanceSql(column: SQL, query: SQL, dims: number): SQL {
  const D = sql.raw(String(dims));
  return sql`((${column})::vector(${D}) <=> (${query})::vector(${D}))`;
}

export function sameDims(column: SQL, vector: number[]): SQL {
  return sql`vector_dims(${column}) = ${sql.raw(String(vector.length))}`;
}

/**
 * With the binary index (large vectors, lib/db/vector-indexes.ts), how many of the index's
 * nearest by Hamming distance are re-ranked by cosine per row asked for. Recall asks for 30: of
 * the true 10 nearest, its top 10 held 0.94 re-ranking 120, 0.98 re-ranking 180 and 0.99
 * re-ranking 240 (1536-d vectors, 10,000 facts; bench/RESULTS.md).
 */
export const BINARY_RERANK_FACTOR = 6;

export interface NearestSearch {
  /** The table and its alias: sql`${facts} f`. */
  from: SQL;
  /** The alias's embedding column: sql`f.embedding`. */
  column: SQL;
  /** What each row returns, beside its `distance`. */
  select: SQL;
  /** The search's filter (tenant, dataset, ...), over the alias. */
  where: SQL;
  /** The query vector: any vector or halfvec expression of `dims` dimensions. */
  query: SQL;
  dims: number;
  /** How many rows (a LIMIT expression). */
  limit: SQL;
  /**
   * With the single-precision index, how many rows the index scan yields when more than `limit`
   * (a LIMIT expression): the `limit` nearest of them by exact distance are kept (see
   * searchLimitsFor). The binary index re-ranks its own BINARY_RERANK_FACTOR × `limit`.
   */
  scan?: SQL;
}

/**
 * The `limit` rows nearest `query` by cosine, each with its cosine `distance`, in an index scan
 * of the table's HNSW index (its expression and predicate, ascending, with a LIMIT; pgvector's
 * iterative scan keeps going until the filter has let `limit` rows through). With the binary
 * index, the BINARY_RERANK_FACTOR × `limit` nearest by the sign bits, re-ranked by cosine.
 * `distance` is exact over the stored (half-precision) vectors either way.
 */
export function nearestSql(s: NearestSearch): SQL {
  const D = sql.raw(String(s.dims));
  // The single-precision index's expression is the distance's left operand, so ordering by the
  // distance is an index scan.
  const distance = cosineDistanceSql(s.column, s.query, s.dims);
  const rows = sql`SELECT ${s.select}, ${distance} AS distance FROM ${s.from}
      WHERE ${s.where} AND vector_dims(${s.column}) = ${D}`;
  if (vectorIndexKind(s.dims) === "float32") {
    if (!s.scan) return sql`${rows} ORDER BY ${distance} LIMIT ${s.limit}`;
    // The iterative scan yields each further batch in its own order (relaxed_order), while the
    // planner takes the subquery's rows as ordered by `distance` and would drop an outer ORDER BY
    // distance (PostgreSQL 17 keeps a subquery's ordering): `distance + 0` is a sort it must do.
    return sql`SELECT * FROM (${rows} ORDER BY ${distance} LIMIT ${s.scan}) scanned
      ORDER BY distance + 0 LIMIT ${s.limit}`;
  }
  return sql`SELECT * FROM (${rows}
      ORDER BY binary_quantize(${s.column})::bit(${D}) <~> binary_quantize((${s.query})::vector(${D}))::bit(${D})
      LIMIT (${s.limit}) * ${sql.raw(String(BINARY_RERANK_FACTOR))}) candidates ORDER BY distance LIMIT ${s.limit}`;
}

/**
 * A small dataset's rows at most: below it, recall finds a dataset's nearest rows by reading its
 * own (exactNearestSql), above it through the HNSW index. The HNSW index spans every tenant's
 * rows, and a search filtered down to a small share of them walks the others' until enough pass
 * the filter (one dataset of 100 messages among 100,000: 238 ms, stopping at pgvector's scan
 * limit with part of its candidates). Which path a plan takes cannot be left to the planner: a
 * statement planned once for every dataset (a generic plan) takes the path right for an average
 * dataset, so in a table of many small datasets and a few large ones, the large ones' recall read
 * and sorted every row (a dataset of 20,000 facts beside 2,000 of 10: 50 ms against 6 alone).
 * The cost of the exact path is every distance: ~2 µs a row on the embedded database at 256
 * dimensions, more at 1536; a dataset that is most of its table takes the index below this size
 * too (exactPathSql).
 */
export const VECTOR_SCAN_MAX = 2_000;

/**
 * A dataset of at most VECTOR_SCAN_MAX rows still searches the HNSW index when it is a large share
 * of its table: its rows squared more than this times the table's. The index walks about `limit`
 * × table / dataset rows until enough are the dataset's, the exact path reads all the dataset's,
 * so the crossover grows with the dataset's size squared. Measured at 2,000 facts (256 dims): the
 * index 8.0-9.0 ms p50 against 10.0 by its own rows among 20,000 facts, 12.6 against 8.4-9.7
 * among 30,000; alone in its table (one user's memory on `npm start`) recall took 24.0 ms by its
 * own rows at 1536 dimensions and 14.1 at 256, 10.9 and 6.4 by the indexes (bench/RESULTS.md,
 * night of 2026-11-30). Up to 175 rows a dataset always reads its own; one of 100 among 100,000
 * (the many-tenants bench) too.
 */
export const EXACT_SHARE_FACTOR = 175;

/**
 * Whether a dataset of `n` rows of `table` takes the exact path (its own rows) rather than the
 * HNSW index: n ≤ `atMost` (VECTOR_SCAN_MAX) and n² ≤ EXACT_SHARE_FACTOR × the table's rows, as
 * its last analysis counted them (`pg_class.reltuples`, at least `n`; never analysed: by size
 * alone). The keyword lookups choose between a dataset's rows and the keyword index so too. One
 * catalog row.
 */
export function exactPathSql(n: SQL, table: string, atMost = VECTOR_SCAN_MAX): SQL {
  const max = sql.raw(String(atMost));
  const factor = sql.raw(String(EXACT_SHARE_FACTOR));
  return sql`(SELECT x.n <= ${max} AND coalesce((SELECT c.reltuples < 0 OR x.n * x.n <= ${factor} * GREATEST(c.reltuples, x.n)
      FROM pg_class c WHERE c.oid = ${sql.raw(`'${table}'`)}::regclass), true) FROM (SELECT (${n})::float8 AS n) x)`;
}

/**
 * The `limit` rows nearest `query` by exact cosine among those `where` finds (one dataset's, at
 * most VECTOR_SCAN_MAX: the caller's count must guarantee it), read through the dataset's B-tree
 * newest first (`newest`, its last key) under a LIMIT that never cuts: a plan made for a table of
 * one large dataset would otherwise scan the whole table. Each distance is computed before that
 * sort, so it sorts no vectors. Rows as nearestSql's: `select` and `distance`; `select` names an `id`.
 */
export function exactNearestSql(s: Omit<NearestSearch, "scan"> & { newest: SQL }): SQL {
  return sql`SELECT * FROM (${ownRowsSql(s)}) own ORDER BY distance, id LIMIT ${s.limit}`;
}

/**
 * The rows exactNearestSql sorts: `select` and `distance` of at most VECTOR_SCAN_MAX + 1 rows
 * `where` finds, newest first. For a caller that must count them itself (rows not counted apart:
 * more than VECTOR_SCAN_MAX of them means the exact path would leave some out).
 */
export function ownRowsSql(s: Omit<NearestSearch, "scan" | "limit"> & { newest: SQL }): SQL {
  const D = sql.raw(String(s.dims));
  const distance = cosineDistanceSql(s.column, s.query, s.dims);
  return sql`SELECT ${s.select}, ${distance} AS distance FROM ${s.from}
      WHERE ${s.where} AND vector_dims(${s.column}) = ${D}
      ORDER BY ${s.newest} DESC LIMIT ${sql.raw(String(VECTOR_SCAN_MAX + 1))}`;
}

/**
 * `alias.project_id = projectId AND alias.dataset = dataset` written twice: `keyed`, as the
 * dataset's B-tree takes it, and `hidden`, with those keys hidden (`|| ''`) from every index on
 * the columns, for a search or lookup that must not read the dataset's range whatever a plan
 * guessed of its size (nearestInDatasetSql's `hiddenWhere`).
 */
export function datasetFilter(alias: string, projectId: ProjectRef, dataset: string): { keyed: SQL; hidden: SQL } {
  const a = sql.raw(alias);
  return {
    keyed: sql`${a}.project_id = ${projectId} AND ${a}.dataset = ${dataset}`,
    hidden: sql`${a}.project_id || '' = ${projectId} AND ${a}.dataset || '' = ${dataset}`,
  };
}

/**
 * The rows of a dataset's exact path: those `where` finds, newest first (exactNearestSql), or,
 * from a caller that had to read and count them to decide `small` (rows not counted apart), those
 * rows as it read them (`own`: ownRowsSql's columns, e.g. a MATERIALIZED CTE's).
 */
type ExactRows = { newest: SQL } | { own: SQL };

/**
 * A dataset's nearest rows by the path its size calls for, in one statement: the exact path when
 * `small` (a condition evaluated once) holds, the HNSW search (nearestSql) otherwise; the branch
 * not taken is cut by a one-time filter before it reads anything. `where` names the dataset by its
 * B-tree's keys; `hiddenWhere` is the same filter with those keys hidden (datasetFilter), so that the
 * HNSW search cannot take the B-tree, whatever the plan guessed of the dataset's size: for a
 * large one it would read and sort every row.
 */
export function nearestInDatasetSql(s: NearestSearch & ExactRows & { hiddenWhere: SQL; small: SQL }): SQL {
  const { hiddenWhere, small, scan, ...search } = s;
  const exact =
    "own" in s
      ? sql`SELECT * FROM (${s.own}) own WHERE ${small} ORDER BY distance, id LIMIT ${s.limit}`
      : exactNearestSql({ ...search, newest: s.newest, where: sql`${s.where} AND ${small}` });
  return sql`(${exact})
    UNION ALL
    (${nearestSql({ ...search, scan, where: sql`${hiddenWhere} AND NOT ${small}` })})`;
}

/**
 * At most VECTOR_SCAN_MAX rows match `where` (one dataset's, counted through its B-tree, at most
 * one past the threshold read): for a search whose caller keeps no count of them, so that the
 * exact path's LIMIT never leaves the nearest out. A dataset's entities are such rows: its facts
 * are counted, and a dataset of 1,500 facts naming two or three entities each can hold more than
 * 2,000 entities, of which the exact path would have scored the first 2,001 by name.
 */
export function rowsWithinScanMax(from: SQL, where: SQL): SQL {
  const max = VECTOR_SCAN_MAX;
  return sql`((SELECT count(*) FROM (SELECT 1 FROM ${from} WHERE ${where} LIMIT ${sql.raw(String(max + 1))}) own)
    <= ${sql.raw(String(max))})`;
}

/** pgvector's default `hnsw.ef_search` and its maximum. */
export const EF_SEARCH_MIN = 40;
export const EF_SEARCH_MAX = 1000;
/** Facts per unit of `hnsw.ef_search` (see efSearchFor). */
export const FACTS_PER_EF = 160;

/**
 * The HNSW candidate list for a search over a dataset of `facts` facts. The list a search needs
 * to find the true nearest grows with the graph (measured with 256-d vectors, m 16, the dataset
 * half of the table: recall@10 0.98 at 10,000 facts with 40; at 100,000, 0.94 with 200, 0.965
 * with 400, 0.972 with 500, 0.976 with 600, 0.979 with 800), so it grows with the dataset, from
 * pgvector's default (a small dataset pays nothing) to its maximum: 63 at 10,000 facts, 625 at
 * 100,000, 1000 from 160,000. A small dataset in a large table is served by the iterative scan
 * whatever the list (1,000 facts among 200,000: 1.000 with 40).
 */
export function efSearchFor(facts: number): number {
  return Math.min(EF_SEARCH_MAX, Math.max(EF_SEARCH_MIN, Math.ceil(facts / FACTS_PER_EF)));
}

/** efSearchFor in SQL, over an SQL expression for the fact count. */
export function efSearchSql(facts: SQL): SQL {
  return sql`LEAST(${sql.raw(String(EF_SEARCH_MAX))}, GREATEST(${sql.raw(String(EF_SEARCH_MIN))},
    ceil((${facts})::float8 / ${sql.raw(String(FACTS_PER_EF))})))::int`;
}

/** Past this many facts the candidate list is at pgvector's maximum (efSearchFor). */
export const FACTS_AT_EF_MAX = EF_SEARCH_MAX * FACTS_PER_EF;

/** Facts per row the second search reads past the kept ones (extraScanFor): 2,000 rows at a million. */
export const FACTS_PER_EXTRA_ROW = 500;
/** The most rows the second search reads past the kept ones, reached at 2,000,000 facts. */
export const EXTRA_SCAN_MAX = 4 * EF_SEARCH_MAX;

/**
 * Rows a search over a dataset of `facts` facts reads from the single-precision index beyond the
 * rows it keeps: none while the candidate list grows with the dataset; past FACTS_AT_EF_MAX, at
 * least one whole list more, so pgvector's iterative scan searches the graph again from the first
 * search's best discarded candidates, and more as the graph grows (one row per
 * FACTS_PER_EXTRA_ROW facts, at most EXTRA_SCAN_MAX). Where many facts are almost equally near a
 * query, the first search stops before it reaches some of the nearest. Measured at a million
 * facts, 256-d, on the server (bench/RESULTS.md): recall@10 0.888 from one walk; 1,000 rows more
 * gave 0.932-0.976 by build of the graph, under the 0.97 that correctness first asks on most
 * builds; 2,000 gave 0.988 where 1,000 gave 0.962 on the same build, for ~14 ms more, and
 * 0.974 and 0.990 on two new builds (0.976 on the embedded database's, ~30 ms more there). Each
 * extra row is a heap fetch, from disk when the data is not cached. Recall asks for it unless the
 * project turned it off (semantic.vectorSecondSearch, on by default since issue 34).
 */
export function extraScanFor(facts: number): number {
  if (facts <= FACTS_AT_EF_MAX) return 0;
  return Math.min(EXTRA_SCAN_MAX, Math.max(EF_SEARCH_MAX, Math.ceil(facts / FACTS_PER_EXTRA_ROW)));
}

/** extraScanFor in SQL, over an SQL expression for the fact count; none when `secondSearch` is false. */
export function extraScanSql(facts: SQL, secondSearch: SQL): SQL {
  return sql`(CASE WHEN (${secondSearch}) AND (${facts}) > ${sql.raw(String(FACTS_AT_EF_MAX))}
    THEN LEAST(${sql.raw(String(EXTRA_SCAN_MAX))}, GREATEST(${sql.raw(String(EF_SEARCH_MAX))},
      ceil((${facts})::float8 / ${sql.raw(String(FACTS_PER_EXTRA_ROW))})))::int ELSE 0 END)`;
}

/**
 * The LIMITs of a search for `limit` rows over a dataset of `facts` facts (SQL expressions), for
 * nearestSql: the index scan's LIMIT sets the candidate list (limitWithEfSearch), and with the
 * single-precision index and `secondSearch` (a boolean expression, the project's setting) the
 * scan reads extraScanFor(`facts`) rows more and keeps the `limit` nearest by exact distance.
 */
export function searchLimitsFor(
  limit: SQL,
  facts: SQL,
  dims: number,
  secondSearch: SQL,
): Pick<NearestSearch, "limit" | "scan"> {
  if (vectorIndexKind(dims) === "binary") return { limit: limitWithEfSearch(limit, facts, dims) };
  return { limit, scan: limitWithEfSearch(sql`(${limit}) + ${extraScanSql(facts, secondSearch)}`, facts, dims) };
}

/**
 * A search's LIMIT that also sets its HNSW candidate list, inside the one statement: the larger
 * of the session's `hnsw.ef_search` (the database's setting, a floor), efSearchFor(`facts`) and
 * the number of rows the index scan must yield (`limit`, times the re-rank factor with the binary
 * index), at most pgvector's maximum. A Limit node evaluates its count before it pulls its first
 * row, and pgvector reads `hnsw.ef_search` when the scan yields its first row (not when it
 * begins), so the setting is in force for the scan under it. `set_config(..., true)` lasts to
 * the end of the statement's transaction.
 */
export function limitWithEfSearch(limit: SQL, facts: SQL, dims: number): SQL {
  const scanned = vectorIndexKind(dims) === "binary" ? sql`l * ${sql.raw(String(BINARY_RERANK_FACTOR))}` : sql`l`;
  const ef = sql`LEAST(${sql.raw(String(EF_SEARCH_MAX))},
    GREATEST(current_setting('hnsw.ef_search', true)::int, ${efSearchSql(facts)}, ${scanned}))`;
  return sql`(SELECT l FROM (SELECT ${limit} AS l) x WHERE set_config('hnsw.ef_search', ${ef}::text, true) IS NOT NULL)`;
}

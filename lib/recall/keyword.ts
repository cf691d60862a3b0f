import { type SQL, sql } from "drizzle-orm";
import { factTerms, messageTerms } from "../db/schema";
import type { ProjectRef } from "../db/types";

/** Candidates each query term may bring to the keyword signal (the rarest terms matter most). */
export const KEYWORD_PER_TERM = 100;

/**
 * A term held by more than this share of a dataset's documents (and by more than
 * KEYWORD_COMMON_MIN_DOCS of them) brings no candidates of its own: its BM25 weight is low, and
 * finding its documents means reading its whole posting list, the costliest part of a recall at
 * 10k facts. It still scores the candidates the other signals bring.
 */
export const KEYWORD_COMMON_SHARE = 0.05;

/**
 * A term held by at most this many documents is never common, however small the dataset. It was
 * KEYWORD_PER_TERM (100) until 2026-11-30: at 1,000 facts a word of 10% of them then brought all
 * its facts, ~180 candidates a query against ~56 at 10,000, each with its row read and its BM25
 * computed, and recall at 1,000 facts took 11.1-12.6 ms p50 against 7.8 at 10,000. With 20 it
 * takes 6.7-7.5 ms (9.3× the bare HNSW statement against 13-14×), and bench:quality (datasets of
 * ~100 facts and ~320 messages, where this floor is the whole rule) gave the same figures to the
 * tenth (bench/RESULTS.md, morning of 2026-11-30).
 */
export const KEYWORD_COMMON_MIN_DOCS = 20;

/**
 * A dataset of at most this many documents finds a term's documents by reading its own rows (its
 * B-tree) rather than the keyword index, whose posting list for the term spans every tenant's
 * documents: a common word among a million facts is tens of thousands of postings, read to find
 * the few of one small dataset (2.35× a lone dataset's recall among 10,000 tenants of one
 * project, bench/RESULTS.md). Up to here a term held by more than KEYWORD_PER_TERM documents is
 * common (KEYWORD_COMMON_SHARE of this size is KEYWORD_PER_TERM, and KEYWORD_COMMON_MIN_DOCS is
 * less), so each term's documents are taken whole either way: the candidates are the same, only
 * the reading differs.
 */
export const KEYWORD_SCAN_MAX_DOCS = KEYWORD_PER_TERM / KEYWORD_COMMON_SHARE;

/** Okapi BM25's term-frequency saturation and length normalisation. */
export const BM25_K1 = 1.2;
export const BM25_B = 0.75;

/**
 * How many words, each held by no other document, make a full keyword match. The keyword signal
 * is a candidate's BM25 divided by the larger of the best candidate's and the BM25 of an
 * average-length document holding that many such words once (`keywordSignalSql`). Divided by the
 * best candidate's alone, a query whose only match is one common word ("How do I stay active at
 * weekends?" holds "weekend", as facts about family visits and series watched do) gave those
 * facts the full keyword weight, as much as a fact holding all of a question's rare words, and
 * they pushed the fact the question means (by cosine) out of the block. On `npm run
 * bench:quality` (bench/RESULTS.md, evening of 2026-11-29): 1 → hit@1 +1.0, 2 → +1.6 and MRR
 * +0.014, paraphrased questions' hit@8 68.8 → 70.8, no kind lower, messages' evidence in the
 * block +0.2-0.5; 5 and 10 lowered the evidence in the block or hit@1.
 */
export const KEYWORD_FULL_MATCH_WORDS = 2;

/**
 * A keyword-searched collection: its per-dataset statistics table and the names of the
 * statement's CTEs over it. Facts and messages are searched alike: the same English
 * configuration, the same BM25, each against its own statistics.
 */
export interface TermIndex {
  table: typeof factTerms | typeof messageTerms;
  /** `n` (documents) and `avg_len` of the dataset. */
  stats: string;
  /** The query's terms the dataset holds, with `docs`, `n` and `idf`. */
  terms: string;
  /** The same terms as two aligned arrays, `terms` and `idfs`, for bm25Of's lookups. */
  termArrays: string;
  /** A query word every document holds ("user", every fact's subject): left out. */
  stopword?: string;
  /**
   * The statistics lag the index: documents are searchable before they are counted (messages,
   * counted by their thread's embedding job). Every query term is then kept, a term not yet
   * counted as held by no document, so it still brings its documents as candidates; without this
   * (facts, counted by trigger in the statement that writes them) only the terms counted.
   */
  lagging?: true;
}

export const FACT_TERMS: TermIndex = {
  table: factTerms,
  stats: "stats",
  terms: "terms",
  termArrays: "term_arrays",
  stopword: "user",
};
export const MESSAGE_TERMS: TermIndex = {
  table: messageTerms,
  stats: "m_stats",
  terms: "m_terms",
  termArrays: "m_term_arrays",
  lagging: true,
};

/** Whose statistics, and the query whose terms are read. */
interface TermScope {
  projectId: ProjectRef;
  dataset: string;
  query: string;
}

/** The `termArrays` CTE of `ix`: one row, both arrays empty when no term is kept. */
const termArraysCte = (ix: TermIndex) =>
  sql`${sql.identifier(ix.termArrays)} AS (
      SELECT coalesce(array_agg(term), '{}') AS terms, coalesce(array_agg(idf), '{}') AS idfs FROM ${sql.identifier(ix.terms)})`;

/** The `stats`, `terms` and `termArrays` CTEs of `ix` for the query, from the dataset's statistics. */
export function termCtes(ix: TermIndex, scope: TermScope): SQL {
  const ctes = ix.lagging ? laggingTermCtes(ix, scope) : countedTermCtes(ix, scope);
  return sql`${ctes},
    ${termArraysCte(ix)}`;
}

function countedTermCtes(ix: TermIndex, scope: TermScope): SQL {
  const stats = sql.identifier(ix.stats);
  const skip = skipStopword(ix);
  return sql`${stats} AS (
      SELECT docs::float8 AS n, GREATEST(lexemes::float8 / GREATEST(docs, 1), 1) AS avg_len FROM ${ix.table}
      WHERE project_id = ${scope.projectId} AND dataset = ${scope.dataset} AND term = ''),
    ${sql.identifier(ix.terms)} AS (
      SELECT t.term, t.docs, st.n, ln(1 + (st.n - t.docs + 0.5) / (t.docs + 0.5)) AS idf FROM ${ix.table} t CROSS JOIN ${stats} st
      WHERE t.project_id = ${scope.projectId} AND t.dataset = ${scope.dataset} AND t.docs > 0
        AND t.term = ANY (ARRAY(SELECT lexeme FROM unnest(to_tsvector('english', ${scope.query}))${skip})))`;
}

/** The WHERE clause over the query's lexemes that leaves out `ix`'s stopword (none: empty). */
const skipStopword = (ix: TermIndex) => (ix.stopword ? sql` WHERE lexeme <> ${sql.raw(`'${ix.stopword}'`)}` : sql``);

/**
 * termCtes where the statistics lag the index. `stats` is one row even before the dataset's
 * first count (n 0, avg_len 1: an aggregate over its '' row). `terms` is every query term with
 * its counted `docs` (0 when not counted yet, looked up per term through the key), so a term
 * only uncounted documents hold gets the highest idf of the dataset, ln(1 + (n + 0.5) / 0.5), and
 * is never "common" (keywordCandidatesSql): its documents are candidates through the GIN index.
 * `n - docs` is floored at 0 so that idf stays positive whatever the two read.
 */
function laggingTermCtes(ix: TermIndex, scope: TermScope): SQL {
  const stats = sql.identifier(ix.stats);
  return sql`${stats} AS (
      SELECT coalesce(max(docs), 0)::float8 AS n, coalesce(max(GREATEST(lexemes::float8 / GREATEST(docs, 1), 1)), 1) AS avg_len
      FROM ${ix.table} WHERE project_id = ${scope.projectId} AND dataset = ${scope.dataset} AND term = ''),
    ${sql.identifier(ix.terms)} AS (${laggingTermsSql(ix, scope, sql`SELECT u.lexeme FROM unnest(to_tsvector('english', ${scope.query})) u${skipStopword(ix)}`)})`;
}

/**
 * A lagging index's `terms` rows (term, docs, n, idf; laggingTermCtes) for the lexemes `lexemes`
 * selects (a `lexeme` column), after `ix.stats`: each counted `docs` looked up through the key.
 */
export function laggingTermsSql(ix: TermIndex, scope: Omit<TermScope, "query">, lexemes: SQL): SQL {
  return sql`SELECT q.term, q.docs, st.n, ln(1 + (GREATEST(st.n - q.docs, 0) + 0.5) / (q.docs + 0.5)) AS idf
      FROM (SELECT u.lexeme AS term, coalesce((SELECT GREATEST(t.docs, 0) FROM ${ix.table} t
          WHERE t.project_id = ${scope.projectId} AND t.dataset = ${scope.dataset} AND t.term = u.lexeme), 0)::float8 AS docs
        FROM (${lexemes}) u) q CROSS JOIN ${sql.identifier(ix.stats)} st`;
}

/**
 * The keyword candidates: for each of the query's terms that is not common (KEYWORD_COMMON_SHARE),
 * at most KEYWORD_PER_TERM of the documents `lookup` finds for it (`t.term` names the term), so a
 * rare term's documents are always candidates. With `scan` (the same lookup over the dataset's
 * rows, not the keyword index), a small dataset takes it instead: `small`, a condition evaluated
 * once (by default at most KEYWORD_SCAN_MAX_DOCS counted documents, `t.n`), cuts the branch not
 * taken before it reads anything. With `sample`, a term held by more than KEYWORD_PER_TERM
 * documents brings only that many: those are a sample anyway (the first the index lists,
 * unranked), and each candidate costs its row and its BM25. With `brings` (a condition over the
 * term's row, alias `t`), a rule of the caller's decides which terms bring candidates instead.
 * Returns their distinct `id`s.
 */
export function keywordCandidatesSql(
  ix: TermIndex,
  lookup: SQL,
  options: { scan?: SQL; sample?: SQL; small?: SQL; brings?: SQL } = {},
): SQL {
  const { scan, sample } = options;
  const perTerm = sql.raw(String(KEYWORD_PER_TERM));
  const small = options.small ?? sql`t.n <= ${sql.raw(String(KEYWORD_SCAN_MAX_DOCS))}`;
  const limit = sample ? sql`CASE WHEN t.docs <= ${perTerm} THEN ${perTerm} ELSE ${sample} END` : perTerm;
  const found = scan
    ? sql`(SELECT id FROM (${scan}) l WHERE ${small} LIMIT ${perTerm})
        UNION ALL (SELECT id FROM (${lookup}) l WHERE NOT ${small} LIMIT ${limit})`
    : sql`${lookup} LIMIT ${limit}`;
  return sql`SELECT DISTINCT m.id FROM ${sql.identifier(ix.terms)} t CROSS JOIN LATERAL (${found}) m
      WHERE ${options.brings ?? keywordTermBringsCandidates(sql`t`)}`;
}

/** Whether a row of a `terms` CTE (alias `t`) is not common, so it brings candidates of its own. */
export const keywordTermBringsCandidates = (t: SQL) =>
  sql`${t}.docs <= GREATEST(${sql.raw(String(KEYWORD_COMMON_MIN_DOCS))}, ${t}.n * ${sql.raw(String(KEYWORD_COMMON_SHARE))})`;

/**
 * `search @@ query` as a filter the planner cannot answer from the keyword (GIN) index: for
 * keywordCandidatesSql's `scan`, where the dataset's own rows are the cheaper read.
 */
export const matchesWithoutIndex = (search: SQL, query: SQL) => sql`(${search} @@ ${query}) IS TRUE`;

/** `term` as a tsquery matching exactly that lexeme. */
export const termQuery = sql`quote_literal(t.term)::tsquery`;

/**
 * Okapi BM25 of one document (its search vector) for the query's terms; null when none occurs.
 * Only the query's lexemes are unnested: `setweight` marks them (the documents' vectors carry the
 * default weight D only) and `ts_filter` keeps them, with their positions, so a document yields
 * one row per query term it holds instead of one per lexeme it holds (a quarter of BM25's cost at
 * 10k short facts; more for a long message). Each row's idf is read from the terms' arrays by
 * position, computed once per statement: a join with the terms planned a hash table per
 * document, most of BM25's time (issue 32). A lexeme without positions counted 0 and is dropped.
 */
export function bm25Of(search: SQL, ix: TermIndex): SQL {
  const tf = sql`cardinality(u.positions)::float8`;
  const k1 = sql.raw(`${BM25_K1}::float8`);
  const b = sql.raw(`${BM25_B}::float8`);
  const arrays = sql.identifier(ix.termArrays);
  const terms = sql`(SELECT terms FROM ${arrays})`;
  const idf = sql`(SELECT idfs FROM ${arrays})[array_position(${terms}, u.lexeme)]`;
  const avgLen = sql`(SELECT avg_len FROM ${sql.identifier(ix.stats)})`;
  const held = sql`ts_filter(setweight(${search}, 'A', ${terms}), '{a}')`;
  return sql`SELECT sum(${idf} * ${tf} * (${k1} + 1) / (${tf} + ${k1} * (1 - ${b} + ${b} * length(${search}) / ${avgLen}))) AS bm25
    FROM unnest(${held}) u`;
}

/**
 * The keyword signal of the statement's candidates, each one's `bm25` column over the larger of
 * the best candidate's and the reference of KEYWORD_FULL_MATCH_WORDS (a word one document of the
 * dataset's `n` holds weighs ln(1 + (n - 0.5) / 1.5); at average length, held once, its BM25 is
 * that idf). With no statistics yet (messages, before their first count) the reference is null or
 * below zero and the best candidate's alone divides: the signal as before. Raw SQL, for the
 * fused CTEs.
 */
export const keywordSignalSql = (ix: TermIndex) =>
  `coalesce(bm25 / NULLIF(GREATEST(max(bm25) OVER (), ${KEYWORD_FULL_MATCH_WORDS} * (SELECT ln(1 + (n - 0.5) / 1.5) FROM ${ix.stats})), 0), 0)`;

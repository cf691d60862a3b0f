import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbNumber, dbTimestampSet, toIso } from "../db/rows";
import { entities, messageSearch, messages, messageVectors } from "../db/schema";
import type { ProjectRef } from "../db/types";
import {
  cosineDistanceSql,
  datasetFilter,
  exactPathSql,
  FACTS_PER_EF,
  nearestInDatasetSql,
  searchLimitsFor,
  VECTOR_SCAN_MAX,
} from "../db/vectors";
import { quoteComparable, WHITESPACE_CHARS } from "../evidence/write";
import { type MessageRole, messageRole } from "../roles";
import { headOf } from "../text";
import { HOP_STRENGTH } from "./hop";
import {
  bm25Of,
  KEYWORD_PER_TERM,
  keywordCandidatesSql,
  keywordSignalSql,
  keywordTermBringsCandidates,
  laggingTermsSql,
  MESSAGE_TERMS,
  type TermIndex,
  termCtes,
  termQuery,
} from "./keyword";
import { inTimeRangeSql, type TimeRange } from "./time-range";

/**
 * The messages' HNSW candidate list grows with the dataset as the facts' does (efSearchFor), but
 * stops at this `hnsw.ef_search`, reached at 32,000 messages. Facts are the block's answer and
 * get pgvector's maximum (recall@10 ≥ 0.97 at a million); messages are evidence beside them, a
 * few of 42 candidates with keyword matches of their own, and a dataset holds many more of them:
 * at 200,000 messages the facts' rule would walk the graph with 1,000 candidates, several times
 * the rest of recall (measured: 3.2× recall without messages, budget 1.5×). With 200, one search
 * finds ~0.94 of the true 10 nearest at 100,000 vectors (the facts' measurement, bench/RESULTS.md).
 */
export const MESSAGE_EF_SEARCH_MAX = 200;

/**
 * A dataset of at most this many messages finds its candidates in its own rows, read once through
 * its B-tree, rather than in the indexes that span every tenant's messages: its nearest by exact
 * distance over its own vectors (VECTOR_SCAN_MAX), a word's messages among its own rows, not the
 * keyword index's posting list, which among many tenants holds the others' (21,000 postings a
 * word for one dataset of 100 among 100,000 messages, bench/RESULTS.md).
 */
export const MESSAGE_SCAN_MAX = VECTOR_SCAN_MAX;

/**
 * The lexemes of the facts' second hop's entities (the statement's `hop` CTE, lib/recall/hop.ts),
 * searched among messages as the query's terms are: each with its counted `docs`, so that a name
 * many messages hold brings none of them (keywordCandidatesSql), never its whole posting list.
 */
const HOP_TERMS: TermIndex = { ...MESSAGE_TERMS, terms: "m_hop_terms" };

/** A message recall returns as evidence (`include: ["messages"]`), best first. */
export interface RecalledMessage {
  messageId: string;
  threadId: string;
  role: MessageRole;
  /** Its text, the first RECALLED_MESSAGE_CHARS of it when `truncated`. */
  content: string;
  /** True when `content` is the head of a longer message (the whole is in its thread). */
  truncated: boolean;
  createdAt: string;
  /** The fused score (cosine, keyword, time: the facts' weights); 1 without a query. */
  relevanceScore: number;
}

/**
 * A recalled message's `content` holds at most this many characters (UTF-16 units, cut between
 * two graphemes, `truncated` then true). The block shows 240 of them (MESSAGE_LINE_CHARS); the
 * rest is for an app that shows its evidence. Whole, every candidate's text travelled in the
 * statement and the response: a user who pasted documents of a megabyte made each recall with
 * messages megabytes long (26 MB at messageLimit 100), on every model turn of our own clients.
 */
export const RECALLED_MESSAGE_CHARS = 4_000;

/**
 * The episode a fact was extracted from, as its quote's messages are found: its thread and the
 * sequence range it covered. A fact written through the API has none.
 */
export interface QuoteSource {
  threadId: string;
  fromSeq: number;
  toSeq: number;
}

/**
 * How a message scored, each signal before its weight (the dashboard's playground shows them;
 * /v1 does not): cosine (null until the message is embedded, or without a query vector), keyword
 * (keywordSignalSql), entity (HOP_STRENGTH when the message names an entity of the facts' second
 * hop, else 0) and the time term. All null without a query.
 */
export interface MessageSignals {
  vector: number | null;
  keyword: number | null;
  entity: number | null;
  time: number | null;
}

/** A message as the recall statement returns it: the API's shape, its signals and its place in its thread. */
export interface RetrievedMessage extends RecalledMessage {
  signals: MessageSignals;
  seq: number;
}

/** What the message part of the recall statement needs. */
export interface MessageSearch {
  projectId: ProjectRef;
  dataset: string;
  /** Absent: the most recent messages. */
  query?: string;
  /** The query vector as SQL (`query_vector`), when there is one. */
  vector?: { q: SQL; dims: number };
  asOf?: Date;
  time?: TimeRange | null;
}

/**
 * The messages' CTEs of the recall statement, ending with `m_top`: the best `msg_fetch` indexed
 * messages (`s`, the settings CTE, gives it: the block's messages and as many more as facts may
 * quote, see blockMessages). With a query: candidates by keyword (BM25 over message_terms, like
 * facts; a term held by more than KEYWORD_PER_TERM messages brings as many as the vector signal
 * does, a sample either way) and by vector (message_vectors' HNSW index; without an embedding, the most recent
 * instead), or for a small dataset both from its own rows (MESSAGE_SCAN_MAX), and when the query
 * names a time, the messages written in it, and the messages naming an entity of the facts'
 * second hop (`hop`, lib/recall/hop.ts; its names' words searched as the query's are); scored as
 * facts are: cosine + keyword (keywordSignalSql) + entity (the hop's) + time term.
 * Without: the most recent but for repeats (among the newest `depth`), each scored 1.
 */
export function messageCtes(m: MessageSearch): SQL[] {
  const asOf = m.asOf ? sql` AND ms.created_at <= ${m.asOf.toISOString()}::timestamptz` : sql``;
  const inDataset = sql`ms.project_id = ${m.projectId} AND ms.dataset = ${m.dataset}${asOf}`;
  const depth = sql`(SELECT GREATEST(msg_fetch * 3, 30) FROM s)`;
  if (!m.query) {
    // The newest, but for a repeat of a newer one (withoutRepeats), among the newest `depth`.
    return [
      sql`m_top AS (SELECT id, 1.0::float8 AS score, NULL::float8 AS vector, NULL::float8 AS keyword,
        NULL::float8 AS entity, NULL::float8 AS time_match
      FROM (${withoutRepeats(
        sql`SELECT ms.message_id AS id, ms.created_at, ms.search FROM ${messageSearch} ms WHERE ${inDataset}
          ORDER BY ms.created_at DESC, ms.message_id DESC LIMIT ${depth}`,
        sql`created_at DESC, id DESC`,
      )}) d
      ORDER BY created_at DESC, id DESC LIMIT (SELECT msg_fetch FROM s))`,
    ];
  }
  // A term's messages come from the keyword (GIN) index. The plan, made before the term is known,
  // guesses every term matches 0.5% of rows and would rather walk the dataset's B-tree until 100
  // match: for a rare term, every message of the dataset. `project_id || ''` is not that index's
  // key, so the plan cannot take it.
  const termLookupScope = sql`ms.project_id || '' = ${m.projectId} AND ms.dataset = ${m.dataset}${asOf}`;
  const n = sql`coalesce((SELECT n FROM m_stats), 0)`;
  const scanMax = sql.raw(String(MESSAGE_SCAN_MAX));
  const small = sql`(SELECT small FROM m_small)`;
  const mayBeSmall = sql`(SELECT may_be_small FROM m_path)`;
  const bringsCandidates = keywordTermBringsCandidates(sql`t`);
  // A name more than KEYWORD_PER_TERM messages hold brings none of them, as an entity touching
  // more facts than the depth brings none of its facts: both only boost what the other signals
  // bring. Not the query's words' rule (KEYWORD_COMMON_MIN_DOCS, a share): that one is about a
  // word's BM25 weight, and a name's entity signal does not fall with its frequency. At 200,000
  // messages a sample of a frequent name's messages cost 0.5 ms a recall, the hop without it 0.2
  // (bench/RESULTS.md, night of 2026-11-29).
  const nameBringsCandidates = sql`t.docs <= ${sql.raw(String(KEYWORD_PER_TERM))}`;
  const candidatesOf = (ix: TermIndex, options: { sample?: SQL; brings?: SQL }) =>
    keywordCandidatesSql(
      ix,
      sql`SELECT ms.message_id AS id FROM ${messageSearch} ms WHERE ${termLookupScope} AND ms.search @@ ${termQuery}`,
      { ...options, scan: sql`SELECT h.id FROM m_hits h WHERE h.search @@ ${termQuery}`, small },
    );
  const ctes: SQL[] = [
    termCtes(MESSAGE_TERMS, { projectId: m.projectId, dataset: m.dataset, query: m.query }),
    // The facts' second hop reaches messages too: "Which city is my father based in?" finds
    // "has_father Yusuf" by its words, and the message "Yusuf got a job in Toronto", which
    // extraction may have kept no fact of, by the name. A name whose words are all stopwords is
    // no query (numnode 0) and matches nothing.
    sql`m_hop_names AS (SELECT name, q FROM (SELECT e.name, plainto_tsquery('english', e.name) AS q
      FROM hop h JOIN ${entities} e ON e.id = h.id) x WHERE numnode(q) > 0)`,
    sql`m_hop_terms AS (${laggingTermsSql(
      MESSAGE_TERMS,
      m,
      sql`SELECT DISTINCT u.lexeme FROM m_hop_names n CROSS JOIN LATERAL unnest(to_tsvector('english', n.name)) u`,
    )})`,
    // A small dataset's rows (MESSAGE_SCAN_MAX, and a small share of the table: exactPathSql),
    // read only when its count says it may be one: the count lags (messages are counted by their
    // thread's embedding job), so the rows themselves, at most one past the threshold, decide.
    // Through the dataset's B-tree, newest first under the LIMIT, whatever a plan guessed of the
    // dataset's size.
    sql`m_path AS (SELECT ${exactPathSql(n, "message_search")} AS may_be_small)`,
    sql`m_own AS MATERIALIZED (SELECT ms.message_id AS id, ms.search FROM ${messageSearch} ms
      WHERE ${inDataset} AND ${mayBeSmall} ORDER BY ms.created_at DESC LIMIT ${scanMax} + 1)`,
    sql`m_small AS (SELECT ${mayBeSmall} AND count(*) <= ${scanMax} AS small FROM m_own)`,
    // Its rows holding any query or hop term that brings candidates, in one pass: each term's
    // lookup then reads these few.
    sql`m_hits AS MATERIALIZED (SELECT o.id, o.search FROM m_own o WHERE ${small}
      AND o.search @@ (SELECT string_agg(quote_literal(b.term), ' | ')::tsquery
        FROM (SELECT t.term FROM m_terms t WHERE ${bringsCandidates}
          UNION ALL SELECT t.term FROM m_hop_terms t WHERE ${nameBringsCandidates}) b))`,
    sql`m_by_keyword AS (${candidatesOf(MESSAGE_TERMS, { sample: depth })})`,
    sql`m_by_hop AS (${candidatesOf(HOP_TERMS, { brings: nameBringsCandidates })})`,
  ];
  if (m.vector) {
    const vAsOf = m.asOf ? sql` AND v.created_at <= ${m.asOf.toISOString()}::timestamptz` : sql``;
    const counted = sql`LEAST(${n}, ${sql.raw(String(MESSAGE_EF_SEARCH_MAX * FACTS_PER_EF))})`;
    const limits = searchLimitsFor(depth, counted, m.vector.dims, sql`false`);
    const scope = datasetFilter("v", m.projectId, m.dataset);
    ctes.push(
      sql`m_by_vector AS (${nearestInDatasetSql({
        from: sql`${messageVectors} v`,
        column: sql`v.embedding`,
        select: sql`v.message_id AS id`,
        where: sql`${scope.keyed}${vAsOf}`,
        hiddenWhere: sql`${scope.hidden}${vAsOf}`,
        newest: sql`v.created_at`,
        small,
        query: m.vector.q,
        dims: m.vector.dims,
        ...limits,
      })})`,
    );
  } else {
    ctes.push(sql`m_by_vector AS (SELECT ms.message_id AS id, NULL::float8 AS distance FROM ${messageSearch} ms
      WHERE ${inDataset} ORDER BY ms.created_at DESC, ms.message_id DESC LIMIT ${depth})`);
  }
  // A query naming a time brings the messages written in it, newest first, through the dataset's
  // (created_at) B-tree, as the facts' `by_time`: the time term lifts only candidates.
  const byTime = m.time ? sql` UNION ALL SELECT id, NULL::float8 FROM m_by_time` : sql``;
  if (m.time) {
    ctes.push(sql`m_by_time AS (SELECT ms.message_id AS id FROM ${messageSearch} ms WHERE ${inDataset}
      AND ${writtenIn(m.time)} ORDER BY ms.created_at DESC, ms.message_id DESC LIMIT ${depth})`);
  }
  // A candidate the vector search brought has its distance already; only the others read their
  // vector (the CASE runs the subquery for them alone), and none without a query vector: at
  // 200,000 messages, a lookup for half the candidates saved (~0.3 ms of a 13 ms recall).
  const cosine = m.vector
    ? sql`CASE WHEN c.distance IS NOT NULL THEN 1 - c.distance ELSE (SELECT 1 - ${cosineDistanceSql(sql`v.embedding`, m.vector.q, m.vector.dims)}
        FROM ${messageVectors} v WHERE v.message_id = c.id AND vector_dims(v.embedding) = ${sql.raw(String(m.vector.dims))}) END`
    : sql`NULL::float8`;
  // Each candidate's row by its key (LIMIT 1 keeps the subquery a lateral one): the plan, whose
  // guess of the candidates' number is a tenth of the dataset (a LIMIT read from a CTE), would
  // otherwise hash them against every row of message_search (the keyword shape: 5-6 ms at 20,000).
  ctes.push(
    sql`m_scored AS (
      SELECT ms.message_id AS id, ms.created_at, ms.search, (${cosine})::float8 AS vector, coalesce(k.bm25, 0)::float8 AS bm25,
        ${messageTimeTerm(m.time)}::float8 AS time_match,
        CASE WHEN EXISTS (SELECT 1 FROM m_hop_names h WHERE ms.search @@ h.q) THEN ${sql.raw(String(HOP_STRENGTH))} ELSE 0 END::float8 AS entity
      FROM (SELECT id, min(distance) AS distance
        FROM (SELECT id, NULL::float8 AS distance FROM m_by_keyword UNION ALL SELECT id, NULL::float8 FROM m_by_hop
          UNION ALL SELECT id, distance FROM m_by_vector${byTime}) u
        GROUP BY id) c
      CROSS JOIN LATERAL (SELECT ms.message_id, ms.created_at, ms.search FROM ${messageSearch} ms
        WHERE ms.message_id = c.id LIMIT 1) ms
      LEFT JOIN LATERAL (${bm25Of(sql`ms.search`, MESSAGE_TERMS)}) k ON true)`,
    sql`m_ranked AS (
      SELECT id, created_at, search, vector_weight * coalesce(vector, 0) + keyword_weight * keyword + entity_weight * entity
          + time_weight * time_match AS score,
        vector, keyword, entity, time_match
      FROM (SELECT *, ${sql.raw(keywordSignalSql(MESSAGE_TERMS))} AS keyword FROM m_scored) x CROSS JOIN s)`,
    // A repeat of a better message ("Hello, I have a few updates." from every session) is left
    // out here, where it would take one of the block's places and blockMessages would drop it:
    // before, 242 of bench:quality's 510 blocks of six messages came back short.
    sql`m_top AS (
      SELECT id, score, vector, keyword, entity, time_match
      FROM (${withoutRepeats(sql`SELECT * FROM m_ranked`, sql`score DESC, created_at DESC, id`)}) d
      ORDER BY score DESC, created_at DESC, id LIMIT (SELECT msg_fetch FROM s))`,
  );
  return ctes;
}

/**
 * Runs of whitespace (as recall's JavaScript sees it: PostgreSQL's `\s` is ASCII alone under the C
 * locale) and ASCII punctuation, one space in a message's words (sameWordsSql). The punctuation
 * ASCII only, whatever the database's locale: a locale's [[:punct:]] may hold emoji and other
 * symbols, and "😀" and "😢" would then be the same (empty) words.
 */
const NOT_WORDS = `[${WHITESPACE_CHARS}!-/:-@\\[-\`{-~]+`;

/** A message's words: lower case, punctuation and whitespace aside ("OK!", "ok." and "ok" alike). */
const sameWordsSql = (content: SQL) => sql`btrim(regexp_replace(lower(${content}), ${NOT_WORDS}, ' ', 'g'))`;

/**
 * `rows` (with `id` and `search`) but for a repeat of a better one (`better`: their order, best
 * first): a message with the same words as it, up to case and punctuation. Not the search terms
 * alone: the English configuration drops not/now, before/after, on/off as stopwords, so "I am not
 * vegetarian" has the terms of "I am now vegetarian", and its index covers only a long message's
 * head. Only a message whose terms another row shares reads its text, so one with terms of its
 * own costs no lookup (the worst case, 59 candidates all sharing terms, read theirs in 0.6 ms on
 * the embedded database).
 */
function withoutRepeats(rows: SQL, better: SQL): SQL {
  return sql`SELECT DISTINCT ON (search, words) * FROM (
      SELECT r.*, CASE WHEN r.sharing_terms > 1 THEN (SELECT ${sameWordsSql(sql`m.content`)} FROM ${messages} m
        WHERE m.id = r.id) END AS words
      FROM (SELECT x.*, count(*) OVER (PARTITION BY x.search) AS sharing_terms FROM (${rows}) x) r) w
    ORDER BY search, words, ${better}`;
}

/** 1 when the message was written in the time the query names, else 0. */
function messageTimeTerm(time: TimeRange | null | undefined): SQL {
  if (!time) return sql`0`;
  return sql`CASE WHEN ${writtenIn(time)} THEN 1 ELSE 0 END`;
}

/** The message (alias `ms`) was written in the named time. */
const writtenIn = (time: TimeRange) => inTimeRangeSql(sql`ms.created_at`, time);

/**
 * The statement's `messages` column: m_top's messages with their rows, best first, each text cut
 * one character past RECALLED_MESSAGE_CHARS (`left` counts code points, at least as many UTF-16
 * units: retrievedMessage then knows whether it was longer, and cuts it between graphemes).
 */
export const messagesColumn = sql`(SELECT coalesce(jsonb_agg(jsonb_build_object(
    'id', m.id, 'thread_id', m.thread_id, 'seq', m.seq, 'role', m.role,
    'content', left(m.content, ${sql.raw(String(RECALLED_MESSAGE_CHARS + 1))}), 'created_at', m.created_at,
    'score', t.score, 'signals', jsonb_build_object('vector', t.vector, 'keyword', t.keyword, 'entity', t.entity, 'time', t.time_match))
    ORDER BY t.score DESC, m.created_at DESC, m.id), '[]'::jsonb)
  FROM m_top t JOIN ${messages} m ON m.id = t.id) AS messages`;

export const MessageJson = z.object({
  id: z.string(),
  thread_id: z.string(),
  seq: z.number(),
  role: messageRole(),
  content: z.string(),
  created_at: dbTimestampSet,
  score: dbNumber,
  signals: z.object({
    vector: z.number().nullable(),
    keyword: z.number().nullable(),
    entity: z.number().nullable(),
    time: z.number().nullable(),
  }),
});

export function retrievedMessage(m: z.output<typeof MessageJson>): RetrievedMessage {
  return {
    messageId: m.id,
    threadId: m.thread_id,
    role: m.role,
    content: headOf(m.content, RECALLED_MESSAGE_CHARS),
    truncated: m.content.length > RECALLED_MESSAGE_CHARS,
    createdAt: toIso(m.created_at) as string,
    relevanceScore: m.score,
    signals: m.signals,
    seq: m.seq,
  };
}

/**
 * The statement's `quote_sources` column (with messages): for each fetched fact extracted from an
 * episode, that episode's thread and sequence range, `[thread_id, from_seq, to_seq]` by fact id.
 */
export const quoteSourcesColumn = sql.raw(`(SELECT jsonb_object_agg(g.id,
    jsonb_build_array(e.thread_id, e.from_seq, e.to_seq))
  FROM grouped g JOIN episodes e ON e.id = g.episode_id) AS quote_sources`);

export const QuoteSourcesJson = z.record(z.string(), z.tuple([z.string(), z.number(), z.number()]));

export function quoteSourcesOf(json: z.output<typeof QuoteSourcesJson> | null | undefined): Map<string, QuoteSource> {
  return new Map(
    Object.entries(json ?? {}).map(([id, [threadId, fromSeq, toSeq]]) => [id, { threadId, fromSeq, toSeq }]),
  );
}

/** `quote` (quoteComparable) in `text` (quoteComparable) as whole words: not "tom" in "tomorrow". */
export function holdsWords(text: string, quote: string): boolean {
  for (let at = text.indexOf(quote); at >= 0; at = text.indexOf(quote, at + 1)) {
    const before = text.slice(0, at).match(/[\p{L}\p{N}\p{M}]$/u);
    const after = text.slice(at + quote.length).match(/^[\p{L}\p{N}\p{M}]/u);
    const edgeBefore = !before || !/^[\p{L}\p{N}\p{M}]/u.test(quote);
    const edgeAfter = !after || !/[\p{L}\p{N}\p{M}]$/u.test(quote);
    if (edgeBefore && edgeAfter) return true;
  }
  return false;
}

/**
 * The block's messages: the candidates in order, without those a returned fact already quotes
 * (the fact carries that evidence already) and without a repeat of a message kept before it (the
 * same words as one lower-case line: "Hello, I have a few updates." from four threads is one line
 * of evidence, and four lines of the block; the statement's `m_top` already dropped those with the
 * same words up to punctuation too, so that they leave the block its places), at most `limit`.
 * A fact quotes a message that holds its sourceQuote as whole words (compared as extraction checked
 * it and forgetting matches it: quoteComparable) and, for a fact extracted from an episode
 * (`sources`), that is one of the episode's messages: a later message repeating the words with
 * news ("I love coffee, but I quit it last week") is the evidence the fact lacks.
 */
export function blockMessages<M extends RecalledMessage & { seq?: number }>(
  candidates: M[],
  facts: { factId: string; sourceQuote: string }[],
  sources: Map<string, QuoteSource>,
  limit: number,
): M[] {
  const quotes = facts
    .map((f) => ({ quote: quoteComparable(f.sourceQuote), source: sources.get(f.factId) }))
    .filter((q) => q.quote.length > 0);
  const quotedBy = (m: M, text: string, q: (typeof quotes)[number]) =>
    (!q.source ||
      (m.threadId === q.source.threadId &&
        m.seq !== undefined &&
        m.seq >= q.source.fromSeq &&
        m.seq <= q.source.toSeq)) &&
    holdsWords(text, q.quote);
  const kept: M[] = [];
  const seen = new Set<string>();
  for (const m of candidates) {
    if (kept.length >= limit) break;
    const text = quoteComparable(m.content);
    if (seen.has(text) || quotes.some((q) => quotedBy(m, text, q))) continue;
    seen.add(text);
    kept.push(m);
  }
  return kept;
}

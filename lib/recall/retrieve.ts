import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { constantSql } from "../db/constant-sql";
import { withGenericPlan } from "../db/generic-plan";
import { dbInt, dbJson, dbNumber, parsedRowsOf } from "../db/rows";
import { entities, factEntities, facts, projects } from "../db/schema";
import type { ProjectRef } from "../db/types";
import {
  cosineDistanceSql,
  datasetFilter,
  exactPathSql,
  nearestInDatasetSql,
  ownRowsSql,
  searchLimitsFor,
  VECTOR_SCAN_MAX,
  vectorParam,
} from "../db/vectors";
import type { Deps } from "../deps";
import { EpisodeRow, episodePathCte, episodeRecord, rankedEpisodesSql } from "../episodic/episodes";
import { FactRow, factRecord } from "../semantic/facts";
import type { Settings } from "../settings/settings";
import { projectSetting } from "../settings/sql";
import { budgetSpentSql } from "../usage/budget";
import type { RankedFact } from "./context";
import { HOP_SOURCES, HOP_STRENGTH } from "./hop";
import {
  bm25Of,
  FACT_TERMS,
  KEYWORD_SCAN_MAX_DOCS,
  keywordCandidatesSql,
  keywordSignalSql,
  matchesWithoutIndex,
  termCtes,
  termQuery,
} from "./keyword";
import {
  MessageJson,
  messageCtes,
  messagesColumn,
  type QuoteSource,
  QuoteSourcesJson,
  quoteSourcesColumn,
  quoteSourcesOf,
  type RetrievedMessage,
  retrievedMessage,
} from "./messages";
import { inTimeRangeSql, type TimeRange, timeBoundsSql } from "./time-range";

/**
 * How facts are ranked (see docs/ranking.md):
 * - `hybrid`: a query and its embedding: cosine + keyword + entity + time, as weighted scores;
 * - `keyword`: a query but no embedding (the provider failed): the same without cosine, the most
 *   recent facts after the matches;
 * - `recent`: newest validAt first, every score 1 (no query).
 */
export type RankingMode = "hybrid" | "keyword" | "recent";

export interface Retrieval {
  projectId: ProjectRef;
  dataset: string;
  mode: RankingMode;
  query?: string;
  /** The query's embedding: required by `hybrid`; used by episodes whenever present. */
  vector?: number[];
  asOf?: Date;
  /** The time the query names, for the time term (timeRangeOf). */
  time?: TimeRange | null;
  /** Per-call overrides; the project's settings otherwise (read inside the statement). */
  limit?: number;
  minConfidence?: number;
  /** Which parts the statement computes (a part left out comes back null; messages need facts). */
  facts: boolean;
  episodes: boolean;
  messages?: boolean;
  /** Per-call override of messagesInContext. */
  messageLimit?: number;
  /** A CTE recording the request's provider calls so far (lib/usage/sql.ts usageCteOf): no statement of its own. */
  usage?: SQL | null;
  /**
   * Also answer whether the project's monthly token budget is spent (synthesis is then skipped).
   * With the reranker on and a query it is answered anyway (the reranker is skipped too).
   */
  budget?: boolean;
}

/**
 * Each signal's value for a fact, before its weight: cosine similarity to the query, the keyword
 * score (keywordSignalSql), the entity boost (1 for an entity the query
 * names, the similarity of an entity near the query) and the time term (1 when the fact became
 * valid in the time the query names, 0.5 when it was valid then). Null: the signal did not run.
 */
export interface Signals {
  vector: number | null;
  keyword: number | null;
  entity: number | null;
  time: number | null;
}

/** A retrieved fact: its record, rank and group, the entities it touches and its signals. */
export interface RetrievedFact extends RankedFact {
  entities: { name: string; type: string }[];
  signals: Signals;
}

export interface RetrievedEpisode {
  episodeId: string;
  summary: string;
  keyLearnings: string[];
  startedAt: string | null;
  endedAt: string | null;
  relevanceScore: number;
}

/** The read-path settings the statement resolved (the per-call values where given). */
export interface RecallSettings {
  /** The project read (for a /v1 read, the one its API key resolved to inside the statement). */
  projectId: string;
  limit: number;
  /** Messages in the block (with `include: ["messages"]`). */
  messageLimit: number;
  rerank: boolean;
  rerankCandidates: number;
  rerankTimeoutMs: number;
}

export interface Retrieved {
  /**
   * In rank order: the best `limit` facts, or with the reranker on (and a query) the best
   * max(limit, rerankCandidates) for it to reorder.
   */
  facts: RetrievedFact[] | null;
  episodes: { episodes: RetrievedEpisode[]; episodeCount: number } | null;
  /**
   * The best messages, best first: the block's `messageLimit` and as many more as the facts
   * fetched, for those a returned fact quotes to be skipped (blockMessages). Null unless asked.
   */
  messages: RetrievedMessage[] | null;
  /** With messages: the episode each fetched fact was extracted from (blockMessages). */
  quoteSources: Map<string, QuoteSource>;
  /** Null when the project does not exist. */
  settings: RecallSettings | null;
  /** The project's monthly token budget is spent (asked with `budget`, or by the reranker; false otherwise). */
  budgetSpent: boolean;
}

/**
 * One statement for a whole recall: the project's read-path settings, the ranked facts with
 * their groups, entities and signals, and (when asked) the ranked episodes with the dataset's
 * count.
 */
export async function retrieve(deps: Deps, r: Retrieval): Promise<Retrieved> {
  const [row] = parsedRowsOf(RecallRow, await deps.db.execute(recallSql(deps, r)));
  return {
    facts: row?.facts?.map(retrievedFact) ?? null,
    episodes:
      row?.episodes == null
        ? null
        : { episodes: row.episodes.map(retrievedEpisode), episodeCount: row.episode_count ?? 0 },
    messages: row?.messages?.map(retrievedMessage) ?? null,
    quoteSources: quoteSourcesOf(row?.quote_sources),
    settings: row?.settings ?? null,
    budgetSpent: row?.budget_spent === true,
  };
}

const signal = z.number().nullable();
const FactJson = FactRow.extend({
  score: dbNumber,
  rank: dbInt,
  group_name: z.string(),
  entities: z.array(z.object({ name: z.string(), type: z.string() })),
  signals: z.object({ vector: signal, keyword: signal, entity: signal, time: signal }),
});
type FactJson = z.output<typeof FactJson>;

const EpisodeJson = EpisodeRow.extend({ relevance: dbNumber });
type EpisodeJson = z.output<typeof EpisodeJson>;

/** The statement's one row: each part null when it was not asked for (settings: no such project). */
const RecallRow = z.object({
  facts: dbJson(z.array(FactJson).nullable()),
  episodes: dbJson(z.array(EpisodeJson).nullable()),
  episode_count: dbInt.nullable(),
  messages: dbJson(z.array(MessageJson).nullable()),
  quote_sources: dbJson(QuoteSourcesJson.nullable()).optional(),
  budget_spent: z.boolean().optional(),
  settings: dbJson(
    z
      .object({
        projectId: z.string(),
        limit: z.number(),
        messageLimit: z.number(),
        rerank: z.boolean(),
        rerankCandidates: z.number(),
        rerankTimeoutMs: z.number(),
      })
      .nullable(),
  ) satisfies z.ZodType<RecallSettings | null>,
});

function retrievedFact(f: FactJson): RetrievedFact {
  return {
    ...factRecord(f, f.score),
    groupName: f.group_name,
    rank: f.rank,
    entities: f.entities,
    signals: f.signals,
  };
}

function retrievedEpisode(e: EpisodeJson): RetrievedEpisode {
  const record = episodeRecord(e);
  return {
    episodeId: record.episodeId,
    summary: record.summary,
    keyLearnings: record.keyLearnings,
    startedAt: record.startedAt,
    endedAt: record.endedAt,
    relevanceScore: e.relevance,
  };
}

// The statement's parts without parameters are kept as text (lib/db/constant-sql.ts): rendering
// recall's statement from its chunks on every call cost about half a bare HNSW search.
const SETTINGS_COLUMN =
  sql.raw(`(SELECT jsonb_build_object('projectId', project_of, 'limit', lim, 'messageLimit', msg_lim,
      'rerank', rerank, 'rerankCandidates', rerank_n, 'rerankTimeoutMs', rerank_timeout) FROM s) AS settings`);
const FACTS_COLUMN = sql.raw(`(SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', id, 'subject', subject, 'predicate', predicate, 'object', object,
        'object_is_entity', object_is_entity, 'confidence', confidence, 'source_quote', source_quote,
        'valid_at', valid_at, 'valid_until', valid_until, 'invalid_at', invalid_at, 'episode_id', episode_id,
        'score', score, 'rank', rank, 'group_name', group_name, 'entities', entities,
        'signals', jsonb_build_object('vector', vector, 'keyword', keyword, 'entity', entity, 'time', time_match))
        ORDER BY rank), '[]'::jsonb) FROM grouped) AS facts`);

/** Builds the statement; exported for EXPLAIN in the benchmarks. */
export function recallSql(deps: Deps, r: Retrieval): SQL {
  const select: SQL[] = [];
  const cte: SQL[] = [settingsCte(r)];
  select.push(SETTINGS_COLUMN);

  if (r.facts) {
    cte.push(...factCtes(r, deps.config.openai.embeddingDimensions));
    select.push(FACTS_COLUMN);
  } else {
    select.push(sql`NULL::jsonb AS facts`);
  }

  if (r.facts && r.messages) {
    const hybrid = r.mode === "hybrid" && r.query && r.vector;
    cte.push(
      ...messageCtes({
        projectId: r.projectId,
        dataset: r.dataset,
        query: r.mode === "recent" ? undefined : r.query,
        vector: hybrid
          ? { q: sql`(SELECT v FROM query_vector)`, dims: deps.config.openai.embeddingDimensions }
          : undefined,
        asOf: r.asOf,
        time: r.time,
      }),
    );
    select.push(messagesColumn, quoteSourcesColumn);
  } else {
    select.push(sql`NULL::jsonb AS messages`);
  }

  if (r.episodes) {
    const ranking = {
      projectId: r.projectId,
      dataset: r.dataset,
      vector: r.vector ?? null,
      at: r.asOf ?? deps.clock.now(),
      endedBy: r.asOf !== undefined,
      similarityWeight: sql`(SELECT similarity_weight FROM s)`,
      recencyWeight: sql`(SELECT recency_weight FROM s)`,
      limit: sql`(SELECT episode_limit FROM s)`,
    };
    // The path's count is the dataset's total, which the response reports (episodeCount).
    cte.push(episodePathCte(ranking, { whole: true }), sql`ranked_episodes AS (${rankedEpisodesSql(ranking)})`);
    select.push(sql`(SELECT coalesce(jsonb_agg(to_jsonb(e) ORDER BY relevance DESC, id), '[]'::jsonb)
        FROM ranked_episodes e) AS episodes`);
    select.push(sql`(SELECT counted FROM episode_path) AS episode_count`);
  } else {
    select.push(sql`NULL::jsonb AS episodes`, sql`NULL::bigint AS episode_count`);
  }

  if (r.usage) cte.push(r.usage);
  // Synthesis asks whether the budget is spent; so does the reranker, a model call too, but only
  // where the project turned it on (a CASE reads the month's usage only then).
  const spent = budgetSpentSql(r.projectId, deps.clock.now());
  if (r.budget) select.push(sql`${spent} AS budget_spent`);
  else if (r.mode !== "recent" && r.facts)
    select.push(sql`CASE WHEN (SELECT rerank FROM s) THEN ${spent} ELSE false END AS budget_spent`);
  // Planned once per statement text (lib/db/generic-plan.ts): each search is an index scan or a
  // lateral lookup whatever the query's values.
  return withGenericPlan(sql`WITH ${sql.join(cte, sql`,\n`)}\nSELECT ${sql.join(select, sql`, `)}`);
}

/**
 * The read-path settings, read in this statement: the defaults, then the project's stored values
 * that pass their rules (a stored value out of range counts as absent, see lib/settings/sql.ts).
 * The per-call limit and minConfidence were validated by the route. `fetch_lim`: how many ranked
 * facts the statement returns (the reranker, when on, reorders more than the block holds).
 */
function settingsCte(r: Retrieval): SQL {
  const own = sql`${projects.settings}`;
  const setting = semanticSetting(own);
  const reranks = r.mode !== "recent" && r.facts;
  return sql`s AS (SELECT *, msg_lim + fetch_lim AS msg_fetch FROM (
    SELECT *, CASE WHEN rerank AND ${reranks} THEN GREATEST(lim, rerank_n) ELSE lim END AS fetch_lim FROM (SELECT
      ${projects.id} AS project_of,
      coalesce(${r.limit ?? null}::int, ${setting("factsInContext", "int")}) AS lim,
      coalesce(${r.messageLimit ?? null}::int, ${setting("messagesInContext", "int")}) AS msg_lim,
      -- real, as the column is: 0.9 as float8 is above every stored 0.9. Both sides are 0 or at
      -- least FLOAT4_MIN_NORMAL (numberIn, lib/settings/sql.ts), so the cast cannot underflow.
      coalesce(${r.minConfidence ?? null}::float8, ${setting("retrievalMinConfidence", "float8")})::real AS min_conf,
      ${constantSql("recall: the stored settings", () => storedSettings(own))}
      FROM ${projects} WHERE ${projects.id} = ${r.projectId}) own) lims)`;
}

/** A semantic setting read from `own` (projectSetting, which builds each one once). */
const semanticSetting = (own: SQL) => (key: keyof Settings["semantic"], cast: Parameters<typeof projectSetting>[3]) =>
  projectSetting("semantic", key, own, cast);

/** The settings the call cannot override, each as the project stored it (when valid) or its default. */
function storedSettings(own: SQL): SQL {
  const setting = semanticSetting(own);
  return sql`${setting("anchorVectorMin", "float8")} AS anchor_min,
      ${setting("anchorVectorTopK", "int")} AS anchor_k,
      ${setting("vectorWeight", "float8")} AS vector_weight,
      ${setting("keywordWeight", "float8")} AS keyword_weight,
      ${setting("entityWeight", "float8")} AS entity_weight,
      ${setting("timeWeight", "float8")} AS time_weight,
      ${setting("rerank", "boolean")} AS rerank,
      ${setting("rerankCandidates", "int")} AS rerank_n,
      ${setting("rerankTimeoutMs", "int")} AS rerank_timeout,
      ${setting("vectorSecondSearch", "boolean")} AS second_search,
      ${projectSetting("episodic", "contextEpisodes", own, "int")} AS episode_limit,
      ${projectSetting("episodic", "similarityWeight", own, "float8")} AS similarity_weight,
      ${projectSetting("episodic", "recencyWeight", own, "float8")} AS recency_weight`;
}

/**
 * The fact part: candidates from each signal (each already filtered by tenant, dataset, time
 * and, where an index serves the search, confidence), one score per candidate, the best
 * `fetch_lim` with their group and entities. Ends with `grouped`.
 */
function factCtes(r: Retrieval, dims: number): SQL[] {
  const scope = factScope(r);
  if (r.mode === "recent" || !r.query) return [...recentCtes(scope), ...groupedCtes(sql`anchor AS (${NO_ANCHOR})`)];
  const vector = r.mode === "hybrid" && r.vector ? r.vector : undefined;
  const D = sql.raw(String(dims));
  // The query vector is sent and parsed once (~30 KB of text at 1536 dimensions), and every
  // search reads it from `query_vector`, in single precision as the distances are computed.
  const q = vector ? sql`(SELECT v FROM query_vector)` : undefined;
  const depth = sql`(SELECT GREATEST(fetch_lim * 3, 30) FROM s)`;
  const signals: SQL[] = [
    ...(vector ? [sql`query_vector AS (SELECT (${vectorParam(vector)})::vector(${D}) AS v)`] : []),
    keywordCtes(r, scope),
    anchorCtes(r, q ? { q, dims } : undefined),
    // Per anchor, its facts through the index (a lateral subquery that OFFSET 0 keeps from being
    // flattened): a plan made without the query's values (a generic plan) cannot hash the whole
    // fact-entity table instead. Past `depth` of them, the newest (as every other signal that
    // brings candidates): by id, an entity's newest facts could be left out.
    sql`by_anchor AS (SELECT f.id FROM anchor a CROSS JOIN LATERAL (
          SELECT fe.fact_id FROM ${factEntities} fe WHERE fe.entity_id = a.id OFFSET 0) fe
        JOIN ${facts} f ON f.id = fe.fact_id
        WHERE ${scope.eligibleUnkeyed} GROUP BY f.id ORDER BY max(a.strength) DESC, max(f.valid_at) DESC, f.id LIMIT ${depth})`,
  ];
  // The second hop's entities, and their facts as candidates of their own (hopCtes).
  signals.push(hopCtes(scope, depth));
  // The keyword candidates come through kw_bm25 (hopCtes): the eligible ones, with their BM25.
  const sources = ["by_anchor", "by_hop"];
  if (r.time) {
    // A query naming a time brings the facts that became valid in it, newest first, through the
    // dataset's (valid_at) B-tree: the time term lifts a fact only once it is a candidate, and
    // "what did I do in May 2023?" shares neither words nor much meaning with what was done then.
    signals.push(sql`by_time AS (SELECT f.id FROM ${facts} f WHERE ${scope.eligible} AND ${becameValidIn(r.time)}
        ORDER BY f.valid_at DESC, f.id LIMIT ${depth})`);
    sources.push("by_time");
  }
  if (q) {
    // An HNSW index scan (hnsw.iterative_scan keeps it going until the tenant, time and
    // confidence filters have let `depth` rows through), its candidate list and, past pgvector's
    // largest list, how far it reads (the second search, unless the project turned it off) sized for
    // the dataset's fact count (`stats`, the keyword signal's statistics).
    const { limit, scan } = searchLimitsFor(
      depth,
      sql`coalesce((SELECT n FROM stats), 0)`,
      dims,
      sql`(SELECT second_search FROM s)`,
    );
    const limits = {
      limit: constantSql(`recall: vector search limit ${dims}`, () => limit),
      scan: scan && constantSql(`recall: vector search scan ${dims}`, () => scan),
    };
    signals.push(
      sql`by_vector AS (${nearestInDatasetSql({
        from: sql`${facts} f`,
        column: sql`f.embedding`,
        select: sql`f.id`,
        where: scope.eligible,
        hiddenWhere: scope.eligibleUnkeyed,
        newest: sql`f.valid_at`,
        small: smallDataset,
        query: q,
        dims,
        ...limits,
      })})`,
    );
    sources.push("by_vector");
  } else {
    // No embedding: the most recent facts follow the matches (they score 0 and ties go to the newest).
    signals.push(sql`by_recency AS (SELECT f.id FROM ${facts} f WHERE ${scope.eligible}
        ORDER BY f.valid_at DESC, f.id LIMIT ${depth})`);
    sources.push("by_recency");
  }
  const cosine = q
    ? constantSql(
        `recall: cosine ${dims}`,
        () =>
          sql`CASE WHEN vector_dims(f.embedding) = ${D} THEN 1 - ${cosineDistanceSql(sql`f.embedding`, q, dims)} ELSE 0 END`,
      )
    : sql`NULL::float8`;
  // A keyword candidate's BM25 was computed for the hop (kw_bm25) and comes with it among the
  // candidates; the other candidates' only here (coalesce runs the subquery only where the carried
  // one is null). Carried, not joined: a plan made without the values guesses each CTE a row or
  // two and joined kw_bm25 to the candidates by a nested loop, every pair compared (181 × 181 at
  // 1,000 facts: 13 ms of a 20 ms statement). MATERIALIZED: `fused` alone reads `scored`, and
  // inlined there its BM25 subquery ran once per use of `bm25`, twice a candidate.
  const bm25OfCandidate = sql`coalesce(c.kw_bm25, (${factBm25()}))`;
  const scored = sql`scored AS MATERIALIZED (
      SELECT f.id, f.subject, f.predicate, f.object, f.object_is_entity, f.confidence, f.source_quote,
        f.valid_at, f.valid_until, f.invalid_at, f.episode_id,
        (${cosine})::float8 AS vector, coalesce(${bm25OfCandidate}, 0)::float8 AS bm25,
        LEAST(coalesce(a.strength, 0), 1)::float8 AS anchored, ${timeTerm(r.time)}::float8 AS time_match
      FROM (SELECT id, max(bm25) AS kw_bm25 FROM (
          SELECT id, bm25 FROM kw_bm25
          ${sql.join(
            sources.map((name) => sql`UNION ALL SELECT id, NULL::float8 FROM ${sql.raw(name)}`),
            sql` `,
          )}) u GROUP BY id) c
      JOIN ${facts} f ON f.id = c.id
      LEFT JOIN LATERAL (SELECT max(a.strength) AS strength FROM ${factEntities} fe JOIN anchor a ON a.id = fe.entity_id
        WHERE fe.fact_id = f.id) a ON true
      WHERE ${scope.eligibleUnkeyed})`;
  // The keyword score lies in [0, 1] whatever the query's length and rarity (keywordSignalSql);
  // cosine is used as it is (it already lies in [-1, 1]).
  const fused = sql.raw(`fused AS (
      SELECT *, vector_weight * coalesce(vector, 0) + keyword_weight * keyword + entity_weight * entity
        + time_weight * time_match AS score
      FROM (SELECT *, ${keywordSignalSql(FACT_TERMS)} AS keyword,
          GREATEST(anchored, CASE WHEN EXISTS (SELECT 1 FROM fact_entities fe JOIN hop h ON h.id = fe.entity_id
            WHERE fe.fact_id = scored.id) THEN ${HOP_STRENGTH} ELSE 0 END)::float8 AS entity
        FROM scored) x CROSS JOIN s)`);
  return [...signals, scored, fused, ...groupedCtes(null)];
}

interface Scope {
  /** Tenant, dataset and time. */
  inDataset: SQL;
  /** And the confidence floor. */
  eligible: SQL;
  /**
   * `inDataset` and `eligible` with the dataset's B-tree keys hidden (`|| ''`), for a search or a
   * join by key that must not take that B-tree: a plan made once for every dataset (generic) in a
   * table of many small ones guesses every dataset small, and would read a large one whole.
   */
  inDatasetUnkeyed: SQL;
  eligibleUnkeyed: SQL;
}

function factScope(r: Retrieval): Scope {
  const inScope = r.asOf
    ? sql`f.valid_at <= ${r.asOf.toISOString()}::timestamptz
        AND (f.valid_until IS NULL OR f.valid_until > ${r.asOf.toISOString()}::timestamptz)
        AND (f.invalid_at IS NULL OR f.invalid_at > ${r.asOf.toISOString()}::timestamptz)
        AND f.forgotten_at IS NULL`
    : sql`f.invalid_at IS NULL`;
  const confident = sql`f.confidence >= (SELECT min_conf FROM s)`;
  const { keyed, hidden } = datasetFilter("f", r.projectId, r.dataset);
  const inDataset = sql`${keyed} AND ${inScope}`;
  const inDatasetUnkeyed = sql`${hidden} AND ${inScope}`;
  return {
    inDataset,
    eligible: sql`${inDataset} AND ${confident}`,
    inDatasetUnkeyed,
    eligibleUnkeyed: sql`${inDatasetUnkeyed} AND ${confident}`,
  };
}

/** No query: the newest facts, every score 1, no signals. */
function recentCtes(scope: Scope): SQL[] {
  return [
    sql`fused AS (SELECT f.id, f.subject, f.predicate, f.object, f.object_is_entity, f.confidence, f.source_quote,
        f.valid_at, f.valid_until, f.invalid_at, f.episode_id, 1.0::float8 AS score,
        NULL::float8 AS vector, NULL::float8 AS keyword, NULL::float8 AS entity, NULL::float8 AS time_match
      FROM ${facts} f WHERE ${scope.eligible} ORDER BY f.valid_at DESC, f.id LIMIT (SELECT lim FROM s))`,
  ];
}

/**
 * The dataset is small (exactPathSql: at most VECTOR_SCAN_MAX facts, a small share of the table):
 * its vector searches read its own rows rather than the HNSW index. Decided once per statement
 * (`fact_paths`, keywordCtes) for the facts' and the entities' searches.
 */
const smallDataset = sql`(SELECT vectors FROM fact_paths)`;

const NO_ANCHOR = sql`SELECT NULL::text AS id, NULL::float8 AS strength WHERE false`;

/** BM25 of the fact aliased `f` for the query's terms (bm25Of), as one constant fragment. */
const factBm25 = () => constantSql("recall: bm25 of facts", () => bm25Of(sql`f.search`, FACT_TERMS));

/**
 * The second hop's CTEs. `kw_bm25`: the keyword candidates' BM25 (`scored` reads it rather than
 * computing it again); `hop`: the entities of the HOP_SOURCES best of them; `by_hop`: the facts
 * touching those entities, newest first, at most `depth`, as candidates of their own. Boosting
 * only the candidates the other signals brought, the hop reached "Leila works at Airbus in
 * Krakow" from "has_best_friend Leila" only when its meaning alone had made it one: in a
 * 100-fact dataset for most questions, in a large one rarely. An entity touching more than
 * `depth` facts (an employer, a home town) brings none of them, only boosts them: its facts are
 * read no further than that, where ordering them all would cost a read of every one on each
 * recall (+10% on recall's statement at 10k facts, whose seeded entities touch 50 facts each).
 */
function hopCtes(scope: Scope, depth: SQL): SQL {
  return sql`kw_bm25 AS (SELECT c.id, k.bm25 FROM by_keyword c JOIN ${facts} f ON f.id = c.id
        CROSS JOIN LATERAL (${factBm25()}) k
        WHERE ${scope.eligibleUnkeyed}),
    hop AS (SELECT DISTINCT fe.entity_id AS id FROM (SELECT id FROM kw_bm25 WHERE bm25 > 0
        ORDER BY bm25 DESC, id LIMIT ${sql.raw(String(HOP_SOURCES))}) t JOIN ${factEntities} fe ON fe.fact_id = t.id),
    by_hop AS (SELECT f.id FROM hop h CROSS JOIN LATERAL (
          SELECT fe.fact_id, count(*) OVER () AS touched FROM (SELECT fe.fact_id FROM ${factEntities} fe
            WHERE fe.entity_id = h.id LIMIT ${depth} + 1) fe) fe
        JOIN ${facts} f ON f.id = fe.fact_id
        WHERE fe.touched <= ${depth} AND ${scope.eligibleUnkeyed}
        GROUP BY f.id ORDER BY max(f.valid_at) DESC, f.id LIMIT ${depth})`;
}

/**
 * The keyword signal. `terms`: the query's search terms (the same English stemming as the facts'
 * `search` column; "user", every fact's subject, left out) with their inverse document
 * frequency from the dataset's statistics (fact_terms). `by_keyword`: the candidates each term
 * brings (keywordCandidatesSql).
 */
function keywordCtes(r: Retrieval, scope: Scope): SQL {
  // A large dataset's lookup cannot take the dataset's B-tree: a plan made once for every dataset
  // (generic), in a table of many small ones, would walk a large one's facts for each word.
  const byIndex = sql`SELECT f.id FROM ${facts} f WHERE ${scope.inDatasetUnkeyed} AND f.search @@ ${termQuery}`;
  const byRows = sql`SELECT f.id FROM ${facts} f WHERE ${scope.inDataset} AND ${matchesWithoutIndex(sql`f.search`, termQuery)}`;
  // Which paths the dataset takes, once per statement (exactPathSql), by its facts as `stats`
  // counts them (exact, kept by trigger, every row counted, so an exact path never reads more):
  // its vector searches' (smallDataset), and its words' lookups', among its own rows rather than
  // the keyword index, whose posting lists span every tenant's facts (KEYWORD_SCAN_MAX_DOCS; alone
  // in its table, the index holds only its own postings). The candidates are the same either way.
  const n = sql`coalesce((SELECT n FROM stats), 0)`;
  return sql`${termCtes(FACT_TERMS, { projectId: r.projectId, dataset: r.dataset, query: r.query ?? "" })},
    fact_paths AS (SELECT ${exactPathSql(n, "facts")} AS vectors, ${exactPathSql(n, "facts", KEYWORD_SCAN_MAX_DOCS)} AS words),
    by_keyword AS (${keywordCandidatesSql(FACT_TERMS, byIndex, { scan: byRows, small: sql`(SELECT words FROM fact_paths)` })})`;
}

/**
 * Entities the query points at: each named literally (any run of 1-6 of its words equal to an
 * entity's match_key, normalised by the same expression), strength 2, above any similarity; and,
 * with an embedding, the anchorVectorTopK entities nearest the query, if at least anchorVectorMin
 * similar, their similarity as strength. A fact's entity boost is its strongest, capped at 1.
 */
function anchorCtes(r: Retrieval, near: { q: SQL; dims: number } | undefined): SQL {
  const { keyed: inDataset, hidden: inDatasetUnkeyed } = datasetFilter("e", r.projectId, r.dataset);
  // The nearest entities by the path the dataset's size calls for, as the facts': a small dataset
  // (its facts' count, kept exact by trigger) scores its own entities (`e_own`, read once through
  // its B-tree), unless they turn out more than VECTOR_SCAN_MAX (they are not counted apart: a
  // dataset of 1,500 facts naming a few entities each can hold more, and the exact path would
  // have left the rest out); any other dataset searches the HNSW index with its keys hidden.
  // Left to the plan's guess from the table's statistics, a large dataset's 20,000 entities were
  // read whole beside many small datasets (25 ms), and a small one beside a few large ones walks
  // the HNSW graph through the other tenants' entities.
  const ownEntities = near
    ? sql`e_own AS MATERIALIZED (${ownRowsSql({
        from: sql`${entities} e`,
        column: sql`e.embedding`,
        select: sql`e.id`,
        where: sql`${inDataset} AND ${smallDataset}`,
        // The name index's order within the dataset.
        newest: sql`e.type`,
        query: near.q,
        dims: near.dims,
      })}),
    e_small AS (SELECT ${smallDataset} AND count(*) <= ${sql.raw(String(VECTOR_SCAN_MAX))} AS small FROM e_own),
    `
    : sql``;
  const nearest = near
    ? sql`UNION ALL
          SELECT id, 1 - distance FROM (${nearestInDatasetSql({
            from: sql`${entities} e`,
            column: sql`e.embedding`,
            select: sql`e.id`,
            where: inDataset,
            hiddenWhere: inDatasetUnkeyed,
            own: sql`SELECT * FROM e_own`,
            small: sql`(SELECT small FROM e_small)`,
            query: near.q,
            dims: near.dims,
            limit: sql`(SELECT anchor_k FROM s)`,
          })}) near WHERE 1 - distance >= (SELECT anchor_min FROM s)`
    : sql``;
  // MATERIALIZED: referenced once, `words` would be inlined and its regular expressions run again
  // for every (start, length) pair of `phrases` (~60 times; a third of the statement at 10k facts).
  // The phrases are looked up in one index scan (`= ANY` of their array, computed once) rather than
  // one lateral scan per phrase, whose setup ~60 times over cost more than the lookups (issue 34),
  // in the match key's own index by its whole key: the tenant's keys are written as that index
  // holds them (`|| ''`), so no plan can read the dataset's range of another index for them (one
  // that guessed a dataset small read a large one's 20,000 entities for each recall). Either way no
  // plan can hash the whole entity table, whatever the query's values.
  return sql`${ownEntities}words AS MATERIALIZED (
      SELECT regexp_split_to_array(btrim(regexp_replace(lower(${r.query ?? ""}), '[^[:alnum:]]+', ' ', 'g')), ' ') AS w),
    phrases AS (
      SELECT array_to_string(w[i : i + n], ' ') AS phrase
      FROM words, generate_series(1, cardinality(w)) i, generate_series(0, 5) n WHERE i + n <= cardinality(w)),
    anchor AS (
      SELECT id, max(strength) AS strength FROM (
        SELECT e.id, 2.0::float8 AS strength FROM ${entities} e
        WHERE e.match_key = ANY (ARRAY(SELECT phrase FROM phrases WHERE phrase <> ''))
          AND ${inDatasetUnkeyed}
        ${nearest}
      ) a GROUP BY id)`;
}

/** 1 when the fact became valid in the named time, 0.5 when it was valid during it, else 0. */
function timeTerm(time: TimeRange | null | undefined): SQL {
  if (!time) return sql`0`;
  const { from, to } = timeBoundsSql(time);
  return sql`CASE WHEN ${becameValidIn(time)} THEN 1
      WHEN f.valid_at < ${to} AND coalesce(f.valid_until, 'infinity') > ${from} THEN 0.5 ELSE 0 END`;
}

/** The fact (alias `f`) became valid in the named time. */
const becameValidIn = (time: TimeRange) => inTimeRangeSql(sql`f.valid_at`, time);

/**
 * The best `fetch_lim` facts by score (ties: newest, then id), each with its group (the strongest
 * anchor it touches, else the entity it touches, its object's first, else its subject, "user") and
 * the entities it touches. `anchorCte` when the query path did not define `anchor`.
 */
function groupedCtes(anchorCte: SQL | null): SQL[] {
  return [...(anchorCte ? [anchorCte] : []), constantSql("recall: top and grouped", topAndGrouped)];
}

function topAndGrouped(): SQL {
  return sql.join(
    [
      sql`top AS (
      SELECT u.*, row_number() OVER (ORDER BY u.score DESC, u.valid_at DESC, u.id) AS rank
      FROM fused u ORDER BY u.score DESC, u.valid_at DESC, u.id LIMIT (SELECT fetch_lim FROM s))`,
      sql`grouped AS (
      SELECT t.*, coalesce(g.name, t.subject) AS group_name, coalesce(te.entities, '[]'::jsonb) AS entities
      FROM top t LEFT JOIN LATERAL (
        SELECT e.name FROM ${factEntities} fe JOIN ${entities} e ON e.id = fe.entity_id
        LEFT JOIN anchor a ON a.id = e.id
        WHERE fe.fact_id = t.id
        ORDER BY a.strength DESC NULLS LAST, lower(e.name) = lower(t.object) DESC, lower(e.name), e.name, e.id LIMIT 1
      ) g ON true
      LEFT JOIN LATERAL (
        SELECT jsonb_agg(jsonb_build_object('name', e.name, 'type', e.type) ORDER BY lower(e.name), e.type) AS entities
        FROM ${factEntities} fe JOIN ${entities} e ON e.id = fe.entity_id WHERE fe.fact_id = t.id
      ) te ON true)`,
    ],
    sql`,\n`,
  );
}

import { type SQL, sql } from "drizzle-orm";
import { jsonOf, rowsOf } from "../db/rows";
import { entities, episodes, factEntities, facts, projects } from "../db/schema";
import { vectorParam } from "../db/vectors";
import type { Deps } from "../deps";
import { type EpisodeRow, episodeRecord, rankedEpisodesSql } from "../episodic/episodes";
import { type FactRow, factRecord } from "../semantic/facts";
import { projectSetting } from "../settings-sql";
import type { RankedFact } from "./context";

/** Reciprocal Rank Fusion's constant: a rank-1 hit in one signal scores 1/61. */
export const RRF_K = 60;

/** The most recent keyword matches ranked by ts_rank per call (see the keyword signal). */
export const KEYWORD_POOL = 500;

/**
 * How facts are ranked:
 * - `hybrid`: vector, entity anchors and keyword, fused by RRF (a query and its embedding);
 * - `keyword`: keyword and recency, fused by RRF (a query, but asOf or no embedding);
 * - `recent`: newest validAt first, every score 1 (no query).
 */
export type RankingMode = "hybrid" | "keyword" | "recent";

export interface Retrieval {
  projectId: string;
  dataset: string;
  mode: RankingMode;
  query?: string;
  /** The query's embedding: required by `hybrid`; used by episodes whenever present. */
  vector?: number[];
  asOf?: Date;
  /** Per-call overrides; the project's settings otherwise (read inside the statement). */
  limit?: number;
  minConfidence?: number;
  /** Which parts the statement computes (a part left out comes back null). */
  facts: boolean;
  episodes: boolean;
  /**
   * Also report, for the placed facts only, each signal's rank and whether the project exists
   * (the dashboard's playground). The same statement: LEFT JOINs on the signal CTEs, so recall
   * without it is unchanged.
   */
  explain?: boolean;
}

/** Each signal's 1-based rank of a fact; null when the signal did not find it (or did not run). */
export interface SignalRanks {
  factId: string;
  vector: number | null;
  keyword: number | null;
  anchor: number | null;
  recency: number | null;
}

export interface RetrievedEpisode {
  episodeId: string;
  summary: string;
  keyLearnings: string[];
  startedAt: string | null;
  endedAt: string | null;
  relevanceScore: number;
}

export interface Retrieved {
  facts: RankedFact[] | null;
  /** The entities the facts touch, in the order they first appear. */
  entities: { name: string; type: string }[] | null;
  episodes: { episodes: RetrievedEpisode[]; episodeCount: number } | null;
  /** With `explain` (and facts): the signal ranks of the placed facts. */
  ranks?: SignalRanks[] | null;
  /** With `explain`: whether the project exists. */
  projectFound?: boolean;
}

/**
 * One statement for a whole recall: the project's read-path settings, the ranked facts with their
 * anchor groups and entities, and (when asked) the ranked episodes with the dataset's count.
 */
export async function retrieve(deps: Deps, r: Retrieval): Promise<Retrieved> {
  const [row] = rowsOf<{
    facts: unknown;
    entities: unknown;
    episodes: unknown;
    episode_count: unknown;
    ranks?: unknown;
    project_found?: unknown;
  }>(await deps.db.execute(recallSql(deps, r)));
  const factRows = row?.facts == null ? null : jsonOf<FactJson[]>(row.facts as string);
  return {
    facts:
      factRows?.map((f) => ({ ...factRecord(f, Number(f.score)), groupName: f.group_name, rank: Number(f.rank) })) ??
      null,
    entities: row?.entities == null ? null : jsonOf<{ name: string; type: string }[]>(row.entities as string),
    episodes:
      row?.episodes == null
        ? null
        : {
            episodes: jsonOf<(EpisodeRow & { relevance: number })[]>(row.episodes as string).map((e) => {
              const record = episodeRecord(e);
              return {
                episodeId: record.episodeId,
                summary: record.summary,
                keyLearnings: record.keyLearnings,
                startedAt: record.startedAt,
                endedAt: record.endedAt,
                relevanceScore: Number(e.relevance),
              };
            }),
            episodeCount: Number(row.episode_count),
          },
    ...(r.explain
      ? {
          ranks: row?.ranks == null ? null : jsonOf<SignalRanks[]>(row.ranks as string),
          projectFound: row?.project_found === true || row?.project_found === "t",
        }
      : {}),
  };
}

interface FactJson extends FactRow {
  score: number;
  rank: number;
  group_name: string;
}

/** Builds the statement; exported for EXPLAIN in the benchmarks. */
export function recallSql(deps: Deps, r: Retrieval): SQL {
  const dims = deps.config.openai.embeddingDimensions;
  // The read-path settings, read in this statement: the defaults, then the project's stored
  // values that pass their rules (a stored value out of range counts as absent, see
  // lib/settings-sql.ts). The per-call limit and minConfidence were validated by the route.
  const own = sql`${projects.settings}`;
  const cte: SQL[] = [
    sql`s AS (SELECT
      coalesce(${r.limit ?? null}::int, ${projectSetting("semantic", "factsInContext", own, "int")}) AS lim,
      -- real, as the column is: 0.9 as float8 is above every stored 0.9. Both sides are 0 or at
      -- least FLOAT4_MIN_NORMAL (numberIn, settings-sql), so the cast cannot underflow.
      coalesce(${r.minConfidence ?? null}::float8,
        ${projectSetting("semantic", "retrievalMinConfidence", own, "float8")})::real AS min_conf,
      ${projectSetting("semantic", "anchorVectorMin", own, "float8")} AS anchor_min,
      ${projectSetting("semantic", "anchorVectorTopK", own, "int")} AS anchor_k,
      ${projectSetting("episodic", "contextEpisodes", own, "int")} AS episode_limit,
      ${projectSetting("episodic", "similarityWeight", own, "float8")} AS similarity_weight,
      ${projectSetting("episodic", "recencyWeight", own, "float8")} AS recency_weight
      FROM ${projects} WHERE ${projects.id} = ${r.projectId})`,
  ];
  const select: SQL[] = [];

  if (r.facts) {
    const { ctes, signals } = factCtes(r, dims);
    cte.push(...ctes);
    select.push(sql`(SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', id, 'subject', subject, 'predicate', predicate, 'object', object,
        'object_is_entity', object_is_entity, 'confidence', confidence, 'source_quote', source_quote,
        'valid_at', valid_at, 'valid_until', valid_until, 'invalid_at', invalid_at, 'episode_id', episode_id,
        'score', score, 'rank', rank, 'group_name', group_name) ORDER BY position), '[]'::jsonb) FROM placed) AS facts`);
    select.push(sql`(SELECT coalesce(jsonb_agg(jsonb_build_object('name', name, 'type', type)
        ORDER BY first_position, lower(name), type), '[]'::jsonb) FROM touched) AS entities`);
    if (r.explain) select.push(sql`${explainedRanks(signals)} AS ranks`);
  } else {
    select.push(sql`NULL::jsonb AS facts`, sql`NULL::jsonb AS entities`);
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
    cte.push(sql`ranked_episodes AS (${rankedEpisodesSql(ranking)})`);
    const endedBy = r.asOf ? sql` AND ended_at <= ${r.asOf.toISOString()}::timestamptz` : sql``;
    select.push(sql`(SELECT coalesce(jsonb_agg(to_jsonb(e) ORDER BY relevance DESC, id), '[]'::jsonb)
        FROM ranked_episodes e) AS episodes`);
    select.push(sql`(SELECT count(*) FROM ${episodes}
        WHERE project_id = ${r.projectId} AND dataset = ${r.dataset} AND status = 'completed'${endedBy}) AS episode_count`);
  } else {
    select.push(sql`NULL::jsonb AS episodes`, sql`NULL::bigint AS episode_count`);
  }

  if (r.explain) select.push(sql`EXISTS (SELECT 1 FROM s) AS project_found`);

  return sql`WITH ${sql.join(cte, sql`,\n`)}\nSELECT ${sql.join(select, sql`, `)}`;
}

/** The signal CTE behind each reported rank (the anchor signal ranks facts in `by_anchor`). */
const SIGNAL_OF = { vector: "by_vector", keyword: "by_keyword", anchor: "by_anchor", recency: "by_recency" } as const;

/**
 * The placed facts (at most `lim`, so at most 100) with each signal's rank: one LEFT JOIN per
 * signal the mode ran, null for the others.
 */
function explainedRanks(signals: string[]): SQL {
  const entries = Object.entries(SIGNAL_OF);
  const columns = entries.map(([name, cte]) =>
    sql.raw(signals.includes(cte) ? `'${name}', ${cte}_r.rank` : `'${name}', NULL::bigint`),
  );
  const joins = entries
    .filter(([, cte]) => signals.includes(cte))
    .map(([, cte]) => sql.raw(` LEFT JOIN ${cte} ${cte}_r ON ${cte}_r.id = p.id`));
  return sql`(SELECT coalesce(jsonb_agg(jsonb_build_object('factId', p.id, ${sql.join(columns, sql`, `)})
        ORDER BY p.rank), '[]'::jsonb) FROM placed p${sql.join(joins, sql``)})`;
}

/**
 * The fact part. Each signal ranks at most `depth` candidates, already filtered by tenant,
 * dataset, confidence and time, so a filtered row never takes a rank. Ends with `placed` (the
 * top `lim` facts in rendering order, with scores and groups) and `touched` (their entities).
 */
function factCtes(r: Retrieval, dims: number): { ctes: SQL[]; signals: string[] } {
  const D = sql.raw(String(dims));
  const depth = sql`(SELECT GREATEST(lim * 3, 30) FROM s)`;
  const inScope = r.asOf
    ? sql`f.valid_at <= ${r.asOf.toISOString()}::timestamptz
        AND (f.valid_until IS NULL OR f.valid_until > ${r.asOf.toISOString()}::timestamptz)
        AND (f.invalid_at IS NULL OR f.invalid_at > ${r.asOf.toISOString()}::timestamptz)`
    : sql`f.invalid_at IS NULL`;
  const inDataset = sql`f.project_id = ${r.projectId} AND f.dataset = ${r.dataset} AND ${inScope}`;
  const confident = sql`f.confidence >= (SELECT min_conf FROM s)`;
  const eligible = sql`${inDataset} AND ${confident}`;
  // A signal: its candidates (ORDER BY ... LIMIT inside, so an index can serve it), then ranked.
  const ranked = (name: string, order: string, candidates: SQL) =>
    sql`${sql.raw(name)} AS (SELECT id, row_number() OVER (ORDER BY ${sql.raw(order)}) AS rank FROM (${candidates}) c)`;

  const recency = ranked(
    "by_recency",
    "valid_at DESC, id",
    sql`SELECT f.id, f.valid_at FROM ${facts} f WHERE ${eligible} ORDER BY f.valid_at DESC, f.id LIMIT ${depth}`,
  );
  // Words of the query, OR-ed: a fact matching any of them is a candidate, ranked by ts_rank.
  // "user" is left out: it is every fact's subject, so it would match them all and say nothing.
  const words = [...new Set(r.query?.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])]
    .filter((w) => w !== "user")
    .join(" | ");
  // ts_rank is computed for at most KEYWORD_POOL matches, the most recent: a word common to
  // most of a large dataset would otherwise rank every fact on each call. The tsquery is a
  // constant expression so the planner can estimate it and use the GIN index; the confidence
  // filter (a value read from settings in this statement, unknown when planning) is applied
  // after the pool, so it cannot mislead the estimate into a full scan.
  const tsquery = sql`to_tsquery('english', ${words})`;
  const keyword = ranked(
    "by_keyword",
    "match DESC, valid_at DESC, id",
    sql`SELECT f.id, f.valid_at, ts_rank(f.search, ${tsquery}) AS match FROM (
          SELECT f.id, f.valid_at, f.search, f.confidence FROM ${facts} f WHERE ${inDataset} AND f.search @@ ${tsquery}
          ORDER BY f.valid_at DESC LIMIT ${KEYWORD_POOL}) f
        WHERE ${confident}
        ORDER BY match DESC, f.valid_at DESC, f.id LIMIT ${depth}`,
  );

  const ctes: SQL[] = [];
  let signals: string[];
  let anchors = sql`anchor AS (SELECT NULL::text AS id, NULL::float8 AS strength WHERE false)`;
  if (r.mode === "hybrid" && r.vector) {
    const q = vectorParam(r.vector);
    const qHalf = sql`${`[${r.vector.join(",")}]`}::halfvec(${D})`;
    // The HNSW index's own expression and predicate (lib/db/vector-indexes.ts), ascending with a
    // LIMIT, so the index serves it; hnsw.iterative_scan keeps the scan going until the tenant
    // and confidence filters have let `depth` rows through. Ranked by full-precision distance.
    const vector = ranked(
      "by_vector",
      "distance, id",
      sql`SELECT f.id, f.embedding <=> ${q} AS distance FROM ${facts} f
          WHERE ${eligible} AND vector_dims(f.embedding) = ${D}
          ORDER BY f.embedding::halfvec(${D}) <=> ${qHalf} LIMIT ${depth}`,
    );
    // Anchors: entities named literally in the query (any run of 1-6 of its words equal to an
    // entity's match_key, normalised by the same expression), strength 2, above any similarity;
    // and the anchorVectorTopK entities nearest the query, if at least anchorVectorMin similar.
    anchors = sql`words AS (
        SELECT regexp_split_to_array(btrim(regexp_replace(lower(${r.query ?? ""}), '[^[:alnum:]]+', ' ', 'g')), ' ') AS w),
      phrases AS (
        SELECT array_to_string(w[i : i + n], ' ') AS phrase
        FROM words, generate_series(1, cardinality(w)) i, generate_series(0, 5) n WHERE i + n <= cardinality(w)),
      anchor AS (
        SELECT id, max(strength) AS strength FROM (
          SELECT e.id, 2.0::float8 AS strength FROM ${entities} e
          WHERE e.project_id = ${r.projectId} AND e.dataset = ${r.dataset}
            AND e.match_key IN (SELECT phrase FROM phrases WHERE phrase <> '')
          UNION ALL
          SELECT id, similarity FROM (
            SELECT e.id, 1 - (e.embedding <=> ${q}) AS similarity FROM ${entities} e
            WHERE e.project_id = ${r.projectId} AND e.dataset = ${r.dataset} AND vector_dims(e.embedding) = ${D}
            ORDER BY e.embedding::halfvec(${D}) <=> ${qHalf} LIMIT (SELECT anchor_k FROM s)
          ) near WHERE similarity >= (SELECT anchor_min FROM s)
        ) a GROUP BY id)`;
    // Every eligible fact touching an anchor, by the anchor's strength, then its own similarity.
    const anchored = ranked(
      "by_anchor",
      "strength DESC, similarity DESC, valid_at DESC, id",
      sql`SELECT * FROM (
          SELECT f.id, f.valid_at, max(a.strength) AS strength,
            coalesce(max(1 - (f.embedding <=> ${q})) FILTER (WHERE vector_dims(f.embedding) = ${D}), 0) AS similarity
          FROM anchor a JOIN ${factEntities} fe ON fe.entity_id = a.id JOIN ${facts} f ON f.id = fe.fact_id
          WHERE ${eligible} GROUP BY f.id, f.valid_at) t
        ORDER BY strength DESC, similarity DESC, valid_at DESC, id LIMIT ${depth}`,
    );
    ctes.push(vector, keyword, anchors, anchored);
    signals = ["by_vector", "by_keyword", "by_anchor"];
  } else if (r.mode === "keyword" || r.mode === "hybrid") {
    ctes.push(keyword, recency, anchors);
    signals = ["by_keyword", "by_recency"];
  } else {
    ctes.push(anchors);
    signals = [];
  }

  const fused =
    signals.length > 0
      ? sql`fused AS (
          SELECT id, sum(1.0::float8 / (${RRF_K} + rank)) AS score FROM (
            ${sql.join(
              signals.map((s) => sql`SELECT id, rank FROM ${sql.raw(s)}`),
              sql` UNION ALL `,
            )}) r GROUP BY id)`
      : sql`fused AS (
          SELECT f.id, 1.0::float8 AS score FROM ${facts} f WHERE ${eligible}
          ORDER BY f.valid_at DESC, f.id LIMIT (SELECT lim FROM s))`;

  return {
    signals,
    ctes: [
      ...ctes,
      fused,
      sql`top AS (
      SELECT f.id, f.subject, f.predicate, f.object, f.object_is_entity, f.confidence, f.source_quote,
        f.valid_at, f.valid_until, f.invalid_at, f.episode_id, u.score,
        row_number() OVER (ORDER BY u.score DESC, f.valid_at DESC, f.id) AS rank
      FROM fused u JOIN ${facts} f ON f.id = u.id
      ORDER BY u.score DESC, f.valid_at DESC, f.id LIMIT (SELECT lim FROM s))`,
      // A fact's group: the strongest anchor it touches, else the entity it touches (its object's
      // first), else its subject ("user").
      sql`grouped AS (
      SELECT t.*, coalesce(g.name, t.subject) AS group_name FROM top t LEFT JOIN LATERAL (
        SELECT e.name FROM ${factEntities} fe JOIN ${entities} e ON e.id = fe.entity_id
        LEFT JOIN anchor a ON a.id = e.id
        WHERE fe.fact_id = t.id
        ORDER BY a.strength DESC NULLS LAST, lower(e.name) = lower(t.object) DESC, lower(e.name), e.name, e.id LIMIT 1
      ) g ON true)`,
      // Rendering order: groups where their best fact ranks, facts by rank within a group.
      sql`placed AS (
      SELECT *, row_number() OVER (ORDER BY group_rank, rank) AS position FROM (
        SELECT *, min(rank) OVER (PARTITION BY group_name) AS group_rank FROM grouped) x)`,
      sql`touched AS (
      SELECT e.name, e.type, min(p.position) AS first_position
      FROM placed p JOIN ${factEntities} fe ON fe.fact_id = p.id JOIN ${entities} e ON e.id = fe.entity_id
      GROUP BY e.id, e.name, e.type)`,
    ],
  };
}

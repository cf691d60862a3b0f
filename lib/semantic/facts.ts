import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext, ReadContext } from "../context";
import { dbInt, dbJson, dbNumber, dbTimestamp, dbTimestampSet, parsedRowsOf, toIso } from "../db/rows";
import { entities, factEntities, facts } from "../db/schema";
import type { ProjectRef } from "../db/types";
import { notFound } from "../errors";
import { unindexQuotingMessagesCtes } from "../evidence/write";

/** A `facts` row as raw SQL returns it (the columns of `FACT_COLUMNS`). */
export const FactRow = z.object({
  id: z.string(),
  subject: z.string(),
  predicate: z.string(),
  object: z.string(),
  object_is_entity: z.boolean(),
  confidence: dbNumber,
  source_quote: z.string(),
  valid_at: dbTimestampSet,
  valid_until: dbTimestamp,
  invalid_at: dbTimestamp,
  episode_id: z.string().nullable(),
});
export type FactRow = z.output<typeof FactRow>;

/** The columns `factRecord` reads, qualified by the alias `f` (`FROM facts f`). */
export const FACT_COLUMNS = sql.raw(
  "f.id, f.subject, f.predicate, f.object, f.object_is_entity, f.confidence, f.source_quote, f.valid_at, f.valid_until, f.invalid_at, f.episode_id",
);

/**
 * The spec's Fact. `relevanceScore` is 1 for the unranked lists (as for recall without a query);
 * recall passes its fused score. `confidence` is a `real`: never cast it to float8 in SQL, or 0.9
 * comes back as 0.8999999761581421.
 */
export function factRecord(row: FactRow, relevanceScore = 1) {
  return {
    factId: row.id,
    subject: row.subject,
    predicate: row.predicate,
    object: row.object,
    objectIsEntity: row.object_is_entity,
    confidence: row.confidence,
    sourceQuote: row.source_quote,
    validAt: toIso(row.valid_at) as string,
    validUntil: toIso(row.valid_until),
    invalidAt: toIso(row.invalid_at),
    episodeId: row.episode_id,
    relevanceScore,
  };
}

export type Fact = ReturnType<typeof factRecord>;

export const FACT_LIST_DEFAULT_LIMIT = 50;
export const FACT_LIST_MAX_LIMIT = 100;

export interface FactListQuery {
  limit?: number;
  episodeId?: string;
  /** Only facts linked (fact_entities) to an entity of this name, case-insensitive. */
  entity?: string;
  includeInvalidated?: boolean;
}

/**
 * Facts linked to an entity of the dataset with this name, compared as the entities' unique index
 * does (`lower(name)`), so "café" finds "Café" of any type.
 */
const linkedTo = (projectId: ProjectRef, dataset: string, name: string) => sql`EXISTS (
  SELECT 1 FROM ${factEntities} fe JOIN ${entities} e ON e.id = fe.entity_id
  WHERE fe.fact_id = f.id AND e.project_id = ${projectId} AND e.dataset = ${dataset} AND lower(e.name) = lower(${name})
)`;

/**
 * A dataset's facts, newest validAt first (ties by id descending), capped by `limit` (not
 * paginated: the spec has no cursor). `total` counts every matching fact, not only the page. Live
 * facts only unless `includeInvalidated`. One statement.
 *
 * The page and the total are read apart: the page along the dataset's `validAt` index, its rows
 * alone; the total by a count. (Read as one, with a window count, every matching fact was read,
 * counted and sorted before the LIMIT: 19 ms at 20,000 facts on the embedded database.)
 */
export async function listFacts(
  { deps, projectId }: ReadContext,
  { dataset, ...q }: FactListQuery & { dataset: string },
) {
  const [row] = parsedRowsOf(
    z.object({ total: dbInt, page: dbJson(z.array(FactRow)) }),
    await deps.db.execute(listFactsSql(projectId, { dataset, ...q })),
  );
  return { facts: row.page.map((r) => factRecord(r)), total: row.total };
}

/** The fact list's statement (`listFacts`). */
export function listFactsSql(projectId: ProjectRef, { dataset, ...q }: FactListQuery & { dataset: string }): SQL {
  const limit = Math.min(Math.max(q.limit ?? FACT_LIST_DEFAULT_LIMIT, 1), FACT_LIST_MAX_LIMIT);
  const live = q.includeInvalidated ? sql`` : sql` AND f.invalid_at IS NULL`;
  const episode = q.episodeId === undefined ? sql`` : sql` AND f.episode_id = ${q.episodeId}`;
  const entity = q.entity === undefined ? sql`` : sql` AND ${linkedTo(projectId, dataset, q.entity)}`;
  const matching = sql`FROM ${facts} f
    WHERE f.project_id = ${projectId} AND f.dataset = ${dataset}${live}${episode}${entity}`;
  return sql`
    WITH page AS (SELECT ${FACT_COLUMNS} ${matching} ORDER BY f.valid_at DESC, f.id DESC LIMIT ${limit})
    SELECT (SELECT count(*) ${matching})::int AS total,
      coalesce((SELECT json_agg(row_to_json(page) ORDER BY page.valid_at DESC, page.id DESC) FROM page), '[]'::json) AS page`;
}

/**
 * Soft delete: stamps invalid_at (the clock's now) on a live fact of the dataset, so it leaves
 * retrieval while the row, its sourceQuote and embedding remain. `valid_until` is left alone: it
 * says when the fact stopped being true in the world, invalid_at when the service stopped
 * believing it. Unknown, another dataset's or project's, and already invalidated facts are all
 * "Fact not found" (the spec's lifecycle), so the one conditional UPDATE decides. The messages
 * that said it leave recall's conversation evidence in the same statement (they stay in their
 * thread and the export): forgetting must not bring the user's words back. One statement.
 */
export async function invalidateFact(
  { deps, projectId }: ProjectContext,
  { dataset, factId }: { dataset: string; factId: string },
) {
  const [row] = parsedRowsOf(
    z.object({ id: z.string(), invalid_at: dbTimestampSet }),
    await deps.db.execute(sql`
      WITH forgotten AS (
        UPDATE ${facts} SET invalid_at = ${deps.clock.now().toISOString()}::timestamptz,
          forgotten_at = ${deps.clock.now().toISOString()}::timestamptz
        WHERE id = ${factId} AND project_id = ${projectId} AND dataset = ${dataset} AND invalid_at IS NULL
        RETURNING id, invalid_at, project_id, dataset, source_quote),
      ${unindexQuotingMessagesCtes()}
      SELECT id, invalid_at FROM forgotten`),
  );
  if (!row) throw notFound("Fact not found");
  return { factId: row.id, invalidatedAt: toIso(row.invalid_at) as string };
}

/**
 * Every entity of the dataset (unpaginated, per the spec), by name case-insensitively, then name
 * and type (one name may exist under two types: Apple ORG and Apple PRODUCT). One statement.
 */
export async function listEntities({ deps, projectId }: ReadContext, { dataset }: { dataset: string }) {
  const rows = parsedRowsOf(
    z.object({ name: z.string(), type: z.string() }),
    await deps.db.execute(sql`
      SELECT name, type FROM ${entities}
      WHERE project_id = ${projectId} AND dataset = ${dataset}
      ORDER BY lower(name), name, type`),
  );
  return { entities: rows.map((r) => ({ name: r.name, type: r.type })) };
}

/**
 * Live facts linked to any entity of the dataset with this name (case-insensitive, any type),
 * each once, newest validAt first. An unknown name is no error: `{facts: []}` (the spec's silent
 * outcome 3). One statement.
 */
export async function entityFacts(
  { deps, projectId }: ReadContext,
  { dataset, name }: { dataset: string; name: string },
) {
  const rows = parsedRowsOf(
    FactRow,
    await deps.db.execute(sql`
      SELECT ${FACT_COLUMNS} FROM ${facts} f
      WHERE f.project_id = ${projectId} AND f.dataset = ${dataset} AND f.invalid_at IS NULL
        AND ${linkedTo(projectId, dataset, name)}
      ORDER BY f.valid_at DESC, f.id DESC`),
  );
  return { facts: rows.map((r) => factRecord(r)) };
}

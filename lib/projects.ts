import { desc, eq, or, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "./context";
import { pageWithTotal } from "./db/paging";
import { dbInt, dbJson, dbTimestampSet, parsedRowsOf } from "./db/rows";
import { entities, episodes, facts, projects, threads } from "./db/schema";
import type { DbDeps } from "./deps";
import { badRequest, conflict, notFound } from "./errors";
import { newId } from "./ids";

/** 1 when the project exists, 0 when not (a scalar subquery to put beside what a statement reads). */
export const projectCount = (projectId: string) =>
  sql<number>`(SELECT count(*) FROM ${projects} WHERE id = ${projectId})`;

/**
 * A select-list column, `found`: a project's page or summary tells "nothing yet" from "no such
 * project" in the statement that reads it (see requireProject).
 */
export const projectFoundColumn = (projectId: string) => sql`${projectCount(projectId)}::int AS found`;

/** The 404 for a row read with projectFoundColumn (only the dashboard can name a missing project). */
export function requireProject(row: { found: number } | undefined): void {
  if (!row || row.found === 0) throw notFound("Project not found");
}

export function projectRecord(p: { id: string; name: string; createdAt: Date }) {
  return { id: p.id, name: p.name, createdAt: new Date(p.createdAt).toISOString() };
}

const CreatedRow = z.object({ id: z.string(), name: z.string(), created_at: dbTimestampSet });

/**
 * A new project, unless another has its name: names compare trimmed and case-insensitively
 * (`name_key`, lower(btrim(name)), under a unique index), so "Acme" and " acme " are one name; the
 * name is stored trimmed, as typed. One statement, safe under concurrent creates: the index lets
 * one of them in. It also refuses the name of a project whose key is null, one that repeated an
 * older project's name before names were unique (migration 0036 kept both), which the index
 * cannot see; those are never written again, so no create races them.
 */
export async function createProject(deps: DbDeps, { name }: { name: string }) {
  const trimmed = name.trim();
  const [row] = parsedRowsOf(
    CreatedRow,
    await deps.db.execute(sql`
      INSERT INTO ${projects} (id, name, name_key, created_at)
      SELECT ${newId("prj")}, ${trimmed}, lower(btrim(${trimmed})), ${deps.clock.now().toISOString()}::timestamptz
      WHERE NOT EXISTS (
        SELECT 1 FROM ${projects} WHERE name_key IS NULL AND lower(btrim(name)) = lower(btrim(${trimmed})))
      ON CONFLICT (name_key) DO NOTHING
      RETURNING id, name, created_at`),
  );
  if (!row) throw conflict("Project name already taken");
  return projectRecord({ id: row.id, name: row.name, createdAt: new Date(row.created_at) });
}

export async function listProjects(deps: DbDeps, page: { limit: number; offset: number }) {
  const { rows, total } = await pageWithTotal(
    deps.db,
    projects,
    undefined,
    [desc(projects.createdAt), desc(projects.id)],
    page,
  );
  return { projects: rows.map(projectRecord), total };
}

/** A project named by its id or by its name (which must then be unique), for the admin command line. */
export async function findProject(deps: Pick<DbDeps, "db">, { ref }: { ref: string }) {
  const rows = await deps.db
    .select()
    .from(projects)
    .where(or(eq(projects.id, ref), eq(projects.name, ref)))
    .orderBy(projects.createdAt);
  const byId = rows.find((p) => p.id === ref);
  if (byId) return projectRecord(byId);
  if (rows.length === 0) throw notFound(`Project "${ref}" not found`);
  if (rows.length > 1) {
    throw badRequest(
      `${rows.length} projects are named "${ref}": name one by its id (${rows.map((p) => p.id).join(", ")})`,
    );
  }
  return projectRecord(rows[0]);
}

/** Irreversible: API keys, threads, messages, episodes, facts, entities and jobs cascade. */
export async function deleteProject({ deps, projectId }: ProjectContext): Promise<void> {
  const deleted = await deps.db.delete(projects).where(eq(projects.id, projectId)).returning({ id: projects.id });
  if (deleted.length === 0) throw notFound("Project not found");
}

/**
 * What the dashboard's overview reads, in one statement: messages, episodes by status, fact
 * extraction by its internal status (which the `/v1` API never shows: the operator must not be
 * blind to extraction failures), facts live and superseded (not those forgotten: deleted through
 * `/v1`), entities.
 */
export async function projectStats({ deps, projectId }: ProjectContext) {
  const [row] = parsedRowsOf(
    StatsRow,
    await deps.db.execute(sql`
      SELECT
        ${projectFoundColumn(projectId)},
        (SELECT count(*) FROM ${threads} WHERE project_id = ${projectId})::int AS threads,
        -- Sequence numbers count every row; compaction summaries are not messages anyone wrote.
        (SELECT coalesce(sum(last_seq - summary_count), 0) FROM ${threads} WHERE project_id = ${projectId})::int AS messages,
        (SELECT coalesce(json_object_agg(status, n), '{}'::json) FROM (
           SELECT status, count(*)::int AS n FROM ${episodes} WHERE project_id = ${projectId} GROUP BY status) s) AS episodes,
        (SELECT coalesce(json_object_agg(semantic_status, n), '{}'::json) FROM (
           SELECT semantic_status, count(*)::int AS n FROM ${episodes}
           WHERE project_id = ${projectId} AND status = 'completed' GROUP BY semantic_status) s) AS extraction,
        (SELECT count(*) FILTER (WHERE invalid_at IS NULL) FROM ${facts} WHERE project_id = ${projectId})::int AS facts_live,
        -- Superseded by a newer fact; one forgotten (deleted through /v1) is invalidated too, but not superseded.
        (SELECT count(*) FILTER (WHERE invalid_at IS NOT NULL AND forgotten_at IS NULL) FROM ${facts} WHERE project_id = ${projectId})::int AS facts_superseded,
        (SELECT count(*) FROM ${entities} WHERE project_id = ${projectId})::int AS entities`),
  );
  requireProject(row);
  const counts = (byKey: Record<string, number>, keys: readonly string[]) =>
    Object.fromEntries(keys.map((k) => [k, byKey[k] ?? 0]));
  return {
    threads: row.threads,
    messages: row.messages,
    episodes: counts(row.episodes, ["pending", "processing", "completed", "failed", "archived"]),
    extraction: counts(row.extraction, ["pending", "processing", "completed", "failed", "skipped"]),
    facts: { live: row.facts_live, superseded: row.facts_superseded },
    entities: row.entities,
  };
}

const countsByKey = dbJson(z.record(z.string(), z.number()));
const StatsRow = z.object({
  found: dbInt,
  threads: dbInt,
  messages: dbInt,
  episodes: countsByKey,
  extraction: countsByKey,
  facts_live: dbInt,
  facts_superseded: dbInt,
  entities: dbInt,
});

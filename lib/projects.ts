import { and, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import { pageWithTotal } from "./db/paging";
import { jsonOf, rowsOf } from "./db/rows";
import { entities, episodes, facts, messages, projects, threads } from "./db/schema";
import type { Deps } from "./deps";
import { notFound } from "./errors";
import { newId } from "./ids";
import { crossFieldIssues, deepMerge, resolveProjectSettings, type Settings, type SettingsPatch } from "./settings";

export function projectRecord(p: { id: string; name: string; createdAt: Date }) {
  return { id: p.id, name: p.name, createdAt: new Date(p.createdAt).toISOString() };
}

export async function createProject(deps: Deps, name: string) {
  const [project] = await deps.db
    .insert(projects)
    .values({ id: newId("prj"), name, createdAt: deps.clock.now() })
    .returning();
  return projectRecord(project);
}

export async function listProjects(deps: Deps, page: { limit: number; offset: number }) {
  const { rows, total } = await pageWithTotal(
    deps.db,
    projects,
    undefined,
    [desc(projects.createdAt), desc(projects.id)],
    page,
  );
  return { projects: rows.map(projectRecord), total };
}

/** Irreversible: API keys, threads, messages, episodes, facts, entities and jobs cascade. */
export async function deleteProject(deps: Deps, projectId: string): Promise<void> {
  const deleted = await deps.db.delete(projects).where(eq(projects.id, projectId)).returning({ id: projects.id });
  if (deleted.length === 0) throw notFound("Project not found");
}

export async function getProjectSettings(deps: Deps, projectId: string): Promise<Settings> {
  const [row] = await deps.db.select({ settings: projects.settings }).from(projects).where(eq(projects.id, projectId));
  if (!row) throw notFound("Project not found");
  return resolveProjectSettings(row.settings);
}

/** How many times a settings change is re-applied when another change lands between read and write. */
const SETTINGS_ATTEMPTS = 5;

type StoredSettings = Record<string, unknown>;

/**
 * Applies `change` to the project's stored partial settings and checks the merged result's
 * cross-field rule. The write is conditional on the stored object being the one that was read
 * and checked (optimistic concurrency), so two changes that are each valid alone cannot combine
 * into settings that break the rule; the loser re-reads, re-checks and either lands or gets 400.
 * `change` returning the object it was given writes nothing. Answers the stored settings.
 */
export async function changeProjectSettings(
  deps: Deps,
  projectId: string,
  change: (current: StoredSettings) => StoredSettings,
): Promise<StoredSettings> {
  for (let attempt = 0; attempt < SETTINGS_ATTEMPTS; attempt++) {
    const [row] = await deps.db
      .select({ settings: projects.settings })
      .from(projects)
      .where(eq(projects.id, projectId));
    if (!row) throw notFound("Project not found");
    const current = row.settings ?? {};
    const stored = change(current);
    if (stored === current) return current;
    const issues = crossFieldIssues(resolveProjectSettings(stored));
    // ZodRealError, not ZodError: only the former is an Error, which Hono's onError requires.
    if (issues.length > 0) throw new z.ZodRealError(issues);
    const updated = await deps.db
      .update(projects)
      .set({ settings: stored })
      .where(and(eq(projects.id, projectId), sql`${projects.settings} = ${JSON.stringify(current)}::jsonb`))
      .returning({ settings: projects.settings });
    if (updated.length > 0) return updated[0].settings ?? {};
  }
  throw new Error(`settings of project ${projectId} changed concurrently ${SETTINGS_ATTEMPTS} times in a row`);
}

/** Deep-merges a partial settings object into the project's (see changeProjectSettings). */
export async function patchProjectSettings(deps: Deps, projectId: string, patch: SettingsPatch): Promise<Settings> {
  const stored = await changeProjectSettings(deps, projectId, (current) => deepMerge(current, patch as StoredSettings));
  return resolveProjectSettings(stored);
}

/**
 * What the dashboard's overview reads, in one statement: messages, episodes by status, fact
 * extraction by its internal status (which the `/v1` API never shows: the operator must not be
 * blind to extraction failures), facts live and superseded, entities.
 */
export async function projectStats(deps: Deps, projectId: string) {
  const [row] = rowsOf<Record<string, unknown>>(
    await deps.db.execute(sql`
      SELECT
        (SELECT count(*) FROM ${projects} WHERE id = ${projectId})::int AS found,
        (SELECT count(*) FROM ${threads} WHERE project_id = ${projectId})::int AS threads,
        -- Sequence numbers count every row; compaction summaries are not messages anyone wrote.
        ((SELECT coalesce(sum(last_seq), 0) FROM ${threads} WHERE project_id = ${projectId})
          - (SELECT count(*) FROM ${messages} m JOIN ${threads} t ON t.id = m.thread_id
             WHERE t.project_id = ${projectId} AND m.is_summary))::int AS messages,
        (SELECT coalesce(json_object_agg(status, n), '{}'::json) FROM (
           SELECT status, count(*)::int AS n FROM ${episodes} WHERE project_id = ${projectId} GROUP BY status) s) AS episodes,
        (SELECT coalesce(json_object_agg(semantic_status, n), '{}'::json) FROM (
           SELECT semantic_status, count(*)::int AS n FROM ${episodes}
           WHERE project_id = ${projectId} AND status = 'completed' GROUP BY semantic_status) s) AS extraction,
        (SELECT count(*) FILTER (WHERE invalid_at IS NULL) FROM ${facts} WHERE project_id = ${projectId})::int AS facts_live,
        (SELECT count(*) FILTER (WHERE invalid_at IS NOT NULL) FROM ${facts} WHERE project_id = ${projectId})::int AS facts_superseded,
        (SELECT count(*) FROM ${entities} WHERE project_id = ${projectId})::int AS entities`),
  );
  if (!row || Number(row.found) === 0) throw notFound("Project not found");
  const counts = (v: unknown, keys: readonly string[]) => {
    const parsed = jsonOf((v ?? {}) as Record<string, number> | string);
    return Object.fromEntries(keys.map((k) => [k, Number(parsed[k] ?? 0)]));
  };
  return {
    threads: Number(row.threads),
    messages: Number(row.messages),
    episodes: counts(row.episodes, ["pending", "processing", "completed", "failed", "archived"]),
    extraction: counts(row.extraction, ["pending", "processing", "completed", "failed", "skipped"]),
    facts: { live: Number(row.facts_live), superseded: Number(row.facts_superseded) },
    entities: Number(row.entities),
  };
}

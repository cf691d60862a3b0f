import { count, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import { projects } from "./db/schema";
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
  const [rows, [{ total }]] = await Promise.all([
    deps.db
      .select()
      .from(projects)
      .orderBy(desc(projects.createdAt), desc(projects.id))
      .limit(page.limit)
      .offset(page.offset),
    deps.db.select({ total: count() }).from(projects),
  ]);
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

/**
 * Deep-merges the patch into the stored partial settings in one statement (jsonb concatenation
 * per group), after checking the merged result's cross-field rule.
 */
export async function patchProjectSettings(deps: Deps, projectId: string, patch: SettingsPatch): Promise<Settings> {
  const [row] = await deps.db.select({ settings: projects.settings }).from(projects).where(eq(projects.id, projectId));
  if (!row) throw notFound("Project not found");
  const stored = deepMerge(row.settings ?? {}, patch as Record<string, unknown>);
  const merged = resolveProjectSettings(stored);
  const issues = crossFieldIssues(merged);
  if (issues.length > 0) throw new z.ZodError(issues);
  const updated = await deps.db
    .update(projects)
    .set({
      settings: sql`jsonb_build_object(
        'episodic', coalesce(${projects.settings} -> 'episodic', '{}'::jsonb) || ${JSON.stringify(patch.episodic ?? {})}::jsonb,
        'semantic', coalesce(${projects.settings} -> 'semantic', '{}'::jsonb) || ${JSON.stringify(patch.semantic ?? {})}::jsonb
      ) || (${projects.settings} - 'episodic' - 'semantic')`,
    })
    .where(eq(projects.id, projectId))
    .returning({ settings: projects.settings });
  if (updated.length === 0) throw notFound("Project not found");
  return resolveProjectSettings(updated[0].settings);
}

import { and, count, desc, eq, sql } from "drizzle-orm";
import { threads } from "./db/schema";
import type { Deps } from "./deps";
import { notFound } from "./errors";
import { newId } from "./ids";
import { type EpisodicSettings, stripNullish, type ThreadSettings } from "./settings";

type ThreadRow = typeof threads.$inferSelect;
const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export function threadRecord(t: ThreadRow) {
  return {
    threadId: t.id,
    dataset: t.dataset,
    tags: t.tags,
    settings: t.settings as ThreadSettings,
    messageCount: t.lastSeq,
    lastMessageAt: iso(t.lastMessageAt),
    endedAt: iso(t.endedAt),
    createdAt: new Date(t.createdAt).toISOString(),
    updatedAt: new Date(t.updatedAt).toISOString(),
  };
}

export interface ThreadInput {
  dataset: string;
  tags?: string[];
  settings?: { episodic?: Partial<{ [K in keyof EpisodicSettings]: EpisodicSettings[K] | null }> };
}

/** Null and undefined values are dropped here so the stored override never erases a default. */
function cleanOverride(settings: ThreadInput["settings"]): ThreadSettings {
  const episodic = stripNullish(settings?.episodic ?? {});
  return Object.keys(episodic).length > 0 ? { episodic: episodic as Partial<EpisodicSettings> } : {};
}

export async function createThread(deps: Deps, projectId: string, input: ThreadInput) {
  const now = deps.clock.now();
  const [row] = await deps.db
    .insert(threads)
    .values({
      id: newId("thr"),
      projectId,
      dataset: input.dataset,
      tags: dedupe(input.tags ?? []),
      settings: cleanOverride(input.settings),
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return threadRecord(row);
}

export async function getThread(deps: Deps, projectId: string, threadId: string) {
  const [row] = await deps.db
    .select()
    .from(threads)
    .where(and(eq(threads.id, threadId), eq(threads.projectId, projectId)));
  if (!row) throw notFound("Thread not found");
  return threadRecord(row);
}

/**
 * PATCH: `tags` replaces the tag list; `settings.episodic` is merged into the existing override
 * (null values are stripped, as at creation). One conditional UPDATE.
 */
export async function updateThread(
  deps: Deps,
  projectId: string,
  threadId: string,
  input: Omit<ThreadInput, "dataset">,
) {
  const override = cleanOverride(input.settings);
  const [row] = await deps.db
    .update(threads)
    .set({
      ...(input.tags ? { tags: dedupe(input.tags) } : {}),
      ...(override.episodic
        ? {
            settings: sql`jsonb_set(${threads.settings}, '{episodic}', coalesce(${threads.settings} -> 'episodic', '{}'::jsonb) || ${JSON.stringify(override.episodic)}::jsonb)`,
          }
        : {}),
      updatedAt: deps.clock.now(),
    })
    .where(and(eq(threads.id, threadId), eq(threads.projectId, projectId)))
    .returning();
  if (!row) throw notFound("Thread not found");
  return threadRecord(row);
}

/**
 * Marks the thread ended. Episode extraction from this trigger is added with the episodic layer;
 * until then the trigger is recorded (endedAt) and nothing else happens.
 */
export async function endThread(deps: Deps, projectId: string, threadId: string) {
  const now = deps.clock.now();
  const [row] = await deps.db
    .update(threads)
    .set({ endedAt: now, updatedAt: now })
    .where(and(eq(threads.id, threadId), eq(threads.projectId, projectId)))
    .returning();
  if (!row) throw notFound("Thread not found");
  return { threadId: row.id, dataset: row.dataset, endedAt: now.toISOString() };
}

/** Dashboard browse: every thread of a project, newest first, offset-paginated. */
export async function browseThreads(
  deps: Deps,
  projectId: string,
  page: { limit: number; offset: number; dataset?: string },
) {
  const where = page.dataset
    ? and(eq(threads.projectId, projectId), eq(threads.dataset, page.dataset))
    : eq(threads.projectId, projectId);
  const [rows, [{ total }]] = await Promise.all([
    deps.db
      .select()
      .from(threads)
      .where(where)
      .orderBy(desc(threads.createdAt), desc(threads.id))
      .limit(page.limit)
      .offset(page.offset),
    deps.db.select({ total: count() }).from(threads).where(where),
  ]);
  return { threads: rows.map(threadRecord), total };
}

function dedupe(tags: string[]): string[] {
  return [...new Set(tags)];
}

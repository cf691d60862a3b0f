import { and, desc, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext, ReadContext } from "./context";
import { pageWithTotal } from "./db/paging";
import { dbInt, dbJson, dbTimestamp, dbTimestampSet, parsedRowsOf, toDate, toIso } from "./db/rows";
import { threads } from "./db/schema";
import { dueJobsFrom, pullForwardSql, ringLater } from "./episodic/triggers";
import { notFound } from "./errors";
import { newId } from "./ids";
import { projectCount, requireProject } from "./projects";
import { type EpisodicSettings, stripNullish, type ThreadSettings } from "./settings/settings";

type ThreadRow = typeof threads.$inferSelect;

export function threadRecord(t: ThreadRow) {
  return {
    threadId: t.id,
    dataset: t.dataset,
    tags: t.tags,
    settings: t.settings as ThreadSettings,
    // Written by callers: the sequence numbers less the compaction summaries (as stats count).
    messageCount: t.lastSeq - t.summaryCount,
    lastMessageAt: toIso(t.lastMessageAt),
    endedAt: toIso(t.endedAt),
    createdAt: new Date(t.createdAt).toISOString(),
    updatedAt: new Date(t.updatedAt).toISOString(),
  };
}

export interface ThreadInput {
  dataset: string;
  tags?: string[];
  settings?: { episodic?: Partial<{ [K in keyof EpisodicSettings]: EpisodicSettings[K] | null }> | null } | null;
}

/** Null and undefined values are dropped here so the stored override never erases a default. */
function cleanOverride(settings: ThreadInput["settings"]): ThreadSettings {
  const episodic = stripNullish(settings?.episodic ?? {});
  return Object.keys(episodic).length > 0 ? { episodic: episodic as Partial<EpisodicSettings> } : {};
}

/**
 * One statement: insert the thread and pull every waiting sibling in the dataset forward
 * (their episodes become due within 5 minutes); the pulled timers are rung after the response.
 */
export async function createThread({ deps, projectId }: ProjectContext, input: ThreadInput) {
  const now = deps.clock.now().toISOString();
  const result = await deps.db.execute(sql`
    WITH nt AS (
      INSERT INTO ${threads} (id, project_id, dataset, tags, settings, created_at, updated_at)
      VALUES (${newId("thr")}, ${projectId}, ${input.dataset}, ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(dedupe(input.tags ?? []))}::jsonb)),
        ${JSON.stringify(cleanOverride(input.settings))}::jsonb, ${now}::timestamptz, ${now}::timestamptz)
      RETURNING *
    ),
    pulled AS (${pullForwardSql(now)})
    SELECT nt.*, coalesce((SELECT json_agg(json_build_object('key', key, 'run_at', run_at)) FROM pulled), '[]'::json) AS pulled
    FROM nt`);
  const [row] = parsedRowsOf(
    RawThreadRow.extend({ pulled: dbJson(z.array(z.object({ key: z.string(), run_at: z.string() }))) }),
    result,
  );
  ringLater(deps, dueJobsFrom(row.pulled));
  return threadRecord(threadFromRaw(row));
}

/** A `threads` row as raw SQL or `row_to_json` gives it (snake_case, timestamps as the driver gives them). */
export const RawThreadRow = z.object({
  id: z.string(),
  project_id: z.string(),
  dataset: z.string(),
  tags: z.array(z.string()),
  settings: dbJson(z.record(z.string(), z.unknown())),
  last_seq: dbInt,
  episode_seq: dbInt,
  episode_due: z.boolean().nullable(),
  compacted_seq: dbInt,
  embedded_seq: dbInt,
  live_count: dbInt,
  compact_failed_count: dbInt.nullable(),
  summary_count: dbInt,
  last_message_at: dbTimestamp,
  ended_at: dbTimestamp,
  last_cut_trigger: z.string().nullable(),
  last_cut_at: dbTimestamp,
  created_at: dbTimestampSet,
  updated_at: dbTimestampSet,
});

export function threadFromRaw(r: z.output<typeof RawThreadRow>): ThreadRow {
  return {
    id: r.id,
    projectId: r.project_id,
    dataset: r.dataset,
    tags: r.tags,
    settings: r.settings,
    lastSeq: r.last_seq,
    episodeSeq: r.episode_seq,
    episodeDue: r.episode_due,
    compactedSeq: r.compacted_seq,
    embeddedSeq: r.embedded_seq,
    liveCount: r.live_count,
    compactFailedCount: r.compact_failed_count,
    summaryCount: r.summary_count,
    lastMessageAt: toDate(r.last_message_at),
    endedAt: toDate(r.ended_at),
    lastCutTrigger: r.last_cut_trigger,
    lastCutAt: toDate(r.last_cut_at),
    createdAt: toDate(r.created_at) as Date,
    updatedAt: toDate(r.updated_at) as Date,
  };
}

export async function getThread({ deps, projectId }: ReadContext, { threadId }: { threadId: string }) {
  const [row] = await deps.db
    .select()
    .from(threads)
    .where(and(eq(threads.id, threadId), eq(threads.projectId, projectId)));
  if (!row) throw notFound("Thread not found");
  return threadRecord(row);
}

/**
 * PATCH: `tags` replaces the tag list; `settings.episodic` is merged into the existing override,
 * a null value removing its key's override (the project's setting applies again: no other value
 * could say so). One conditional UPDATE.
 */
export async function updateThread(
  { deps, projectId }: ProjectContext,
  { threadId, ...input }: Omit<ThreadInput, "dataset"> & { threadId: string },
) {
  const override = cleanOverride(input.settings);
  const removed = Object.entries(input.settings?.episodic ?? {})
    .filter(([, value]) => value === null)
    .map(([key]) => key);
  const changes = override.episodic !== undefined || removed.length > 0;
  const [row] = await deps.db
    .update(threads)
    .set({
      ...(input.tags ? { tags: dedupe(input.tags) } : {}),
      ...(changes
        ? {
            // An override left empty goes, as one never given.
            settings: sql`(SELECT CASE WHEN merged = '{}'::jsonb THEN ${threads.settings} - 'episodic'
                ELSE jsonb_set(${threads.settings}, '{episodic}', merged) END
              FROM (SELECT (coalesce(${threads.settings} -> 'episodic', '{}'::jsonb)
                - ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(removed)}::jsonb)))
                || ${JSON.stringify(override.episodic ?? {})}::jsonb AS merged) m)`,
          }
        : {}),
      updatedAt: deps.clock.now(),
    })
    .where(and(eq(threads.id, threadId), eq(threads.projectId, projectId)))
    .returning();
  if (!row) throw notFound("Thread not found");
  return threadRecord(row);
}

/** Dashboard browse: every thread of a project, newest first, offset-paginated. */
export async function browseThreads(
  { deps, projectId }: ProjectContext,
  page: { limit: number; offset: number; dataset?: string },
) {
  const where = page.dataset
    ? and(eq(threads.projectId, projectId), eq(threads.dataset, page.dataset))
    : eq(threads.projectId, projectId);
  const listed = await pageWithTotal(
    deps.db,
    threads,
    where,
    [desc(threads.createdAt), desc(threads.id)],
    page,
    projectCount(projectId),
  );
  requireProject(listed);
  return { threads: listed.rows.map(threadRecord), total: listed.total };
}

function dedupe(tags: string[]): string[] {
  return [...new Set(tags)];
}

import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, parsedRowsOf, toIso } from "../db/rows";
import { episodes, facts, projects } from "../db/schema";
import { notFound } from "../errors";
import { projectFoundColumn, projectRecord, requireProject } from "../projects";

const DAY_MS = 86_400_000;

/** GET /dashboard/projects/:id: one statement. */
export async function getProject({ deps, projectId }: ProjectContext) {
  const [row] = await deps.db.select().from(projects).where(eq(projects.id, projectId));
  if (!row) throw notFound("Project not found");
  return projectRecord(row);
}

/**
 * Episodes and facts created per UTC day over the last `days` days (the last one today, by the
 * clock), oldest first, days without any included. One statement: the counts by day; the days
 * without a row are filled in here.
 */
export async function projectActivity({ deps, projectId }: ProjectContext, { days }: { days: number }) {
  const today = Date.parse(`${deps.clock.now().toISOString().slice(0, 10)}T00:00:00.000Z`);
  const from = new Date(today - (days - 1) * DAY_MS).toISOString();
  const until = new Date(today + DAY_MS).toISOString();
  const perDay = (table: typeof episodes | typeof facts) => sql`
    SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*)::int AS n FROM ${table}
    WHERE project_id = ${projectId} AND created_at >= ${from}::timestamptz AND created_at < ${until}::timestamptz
    GROUP BY 1`;
  const perDayCounts = dbJson(z.record(z.string(), z.number()));
  const [row] = parsedRowsOf(
    z.object({ found: dbInt, episodes: perDayCounts, facts: perDayCounts }),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)},
        (SELECT coalesce(json_object_agg(day, n), '{}'::json) FROM (${perDay(episodes)}) e) AS episodes,
        (SELECT coalesce(json_object_agg(day, n), '{}'::json) FROM (${perDay(facts)}) f) AS facts`),
  );
  requireProject(row);
  return Array.from({ length: days }, (_, i) => {
    const day = new Date(today - (days - 1 - i) * DAY_MS).toISOString().slice(0, 10);
    return { day, episodes: row.episodes[day] ?? 0, facts: row.facts[day] ?? 0 };
  });
}

/**
 * Completed episodes whose fact extraction failed (the status /v1 never shows), newest failure
 * first: the error, how many attempts ran (retries included) and when the last one failed. One
 * statement: the project check, the total and the page.
 */
export async function extractionFailures({ deps, projectId }: ProjectContext, page: { limit: number; offset: number }) {
  const failed = sql`project_id = ${projectId} AND status = 'completed' AND semantic_status = 'failed'`;
  const [row] = parsedRowsOf(
    z.object({ found: dbInt, total: dbInt, page: dbJson(z.array(FailureRow)) }),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)},
        (SELECT count(*) FROM ${episodes} WHERE ${failed})::int AS total,
        coalesce((SELECT json_agg(row_to_json(p) ORDER BY p.updated_at DESC, p.id DESC) FROM (
          SELECT id, thread_id, dataset, semantic_error, semantic_retry_count, updated_at FROM ${episodes}
          WHERE ${failed} ORDER BY updated_at DESC, id DESC LIMIT ${page.limit} OFFSET ${page.offset}) p), '[]'::json) AS page`),
  );
  requireProject(row);
  return {
    failures: row.page.map((f) => ({
      episodeId: f.id,
      threadId: f.thread_id,
      dataset: f.dataset,
      error: f.semantic_error,
      // The first run plus every re-queue (a failed extraction's count of attempts).
      attempts: f.semantic_retry_count + 1,
      failedAt: toIso(f.updated_at),
    })),
    total: row.total,
  };
}

const FailureRow = z.object({
  id: z.string(),
  thread_id: z.string(),
  dataset: z.string(),
  semantic_error: z.string().nullable(),
  semantic_retry_count: z.number(),
  updated_at: z.string(),
});

import { rmSync } from "node:fs";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../../lib/db/migrate";
import { rowsOf } from "../../lib/db/rows";
import type { Database } from "../../lib/db/types";
import { databaseBefore } from "../helpers/migrations";

/**
 * Migration 0018 (one job per episode, one lease) on a database made before it: every episode
 * keeps its status and retry counts, `episodes.locked_until` goes, the retired `semantic` jobs
 * become their episode's one job, and work that was in flight without a job (an extraction or a
 * summary a dead worker left, which the old backstops would have picked up) gets its job.
 */
const DIMS = 64;
let database: Database;
let folder: string;

/** Episodes as a release before 0018 left them: id, status, semantic status, retry counts, lease. */
const BEFORE = [
  ["epi_pending", "pending", "pending", 0, 0, null],
  ["epi_summarising", "processing", "pending", 1, 0, "2099-01-01T00:00:00Z"],
  ["epi_extracting", "completed", "processing", 0, 2, "2000-01-01T00:00:00Z"],
  ["epi_semantic_job", "completed", "pending", 0, 1, null],
  ["epi_both_jobs", "completed", "pending", 0, 1, null],
  ["epi_failed", "failed", "pending", 2, 0, null],
  ["epi_done", "completed", "completed", 0, 3, null],
] as const;

beforeAll(async () => {
  ({ database, folder } = await databaseBefore("0018_one_job_per_episode", DIMS));
  const db = database.db;
  for (const [id, status, semantic, retries, semanticRetries, lockedUntil] of BEFORE) {
    await db.execute(sql`
      INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, from_seq, to_seq,
        started_at, ended_at, retry_count, semantic_retry_count, locked_until)
      VALUES (${id}, 'prj_old', 'thr_old', 'ds', ${status}, ${semantic}, 1, 2, now(), now(), ${retries},
        ${semanticRetries}, ${lockedUntil}::timestamptz)`);
  }
  const job = (kind: string, key: string, episodeId: string) => sql`
    INSERT INTO jobs (id, kind, key, project_id, dataset, run_at, payload, locked_until)
    VALUES (${`job_${key}`}, ${kind}, ${key}, 'prj_old', 'ds', now(), ${JSON.stringify({ episodeId })}::jsonb,
      now() + interval '1 minute')`;
  await db.execute(job("episode", "episode:epi_pending", "epi_pending"));
  await db.execute(job("semantic", "semantic:epi_semantic_job", "epi_semantic_job"));
  await db.execute(job("episode", "episode:epi_both_jobs", "epi_both_jobs"));
  await db.execute(job("semantic", "semantic:epi_both_jobs", "epi_both_jobs"));
  await migrateDatabase(database, DIMS);
});
afterAll(async () => {
  await database?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe("migration 0018: one job per episode, one lease", () => {
  it("keeps every episode's status and retry counts, and drops the episode lease", async () => {
    const rows = rowsOf<Record<string, unknown>>(
      await database.db.execute(sql`
        SELECT id, status, semantic_status, retry_count, semantic_retry_count, claimed_at FROM episodes ORDER BY id`),
    );
    expect(
      rows.map((r) => [r.id, r.status, r.semantic_status, Number(r.retry_count), Number(r.semantic_retry_count)]),
    ).toEqual([...BEFORE].sort((a, b) => a[0].localeCompare(b[0])).map(([id, s, sem, r, sr]) => [id, s, sem, r, sr]));
    expect(rows.every((r) => r.claimed_at === null)).toBe(true);
    const columns = rowsOf<{ column_name: string }>(
      await database.db.execute(sql`
        SELECT column_name FROM information_schema.columns WHERE table_name = 'episodes' AND column_name = 'locked_until'`),
    );
    expect(columns).toEqual([]);
  });

  it("gives each episode with work in flight its one job, and no other kind of job", async () => {
    const jobs = rowsOf<{ key: string; kind: string; payload: unknown }>(
      await database.db.execute(sql`SELECT key, kind, payload FROM jobs ORDER BY key`),
    );
    expect(jobs.map((j) => [j.key, j.kind])).toEqual(
      ["epi_both_jobs", "epi_extracting", "epi_pending", "epi_semantic_job", "epi_summarising"].map((id) => [
        `episode:${id}`,
        "episode",
      ]),
    );
    for (const j of jobs) {
      const payload = typeof j.payload === "string" ? JSON.parse(j.payload) : j.payload;
      expect(`episode:${payload.episodeId}`).toBe(j.key);
    }
  });
});

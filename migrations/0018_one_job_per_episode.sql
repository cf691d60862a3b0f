ALTER TABLE "episodes" ADD COLUMN "claimed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "episodes" DROP COLUMN "locked_until";--> statement-breakpoint
-- One job per episode, one lease (issue 33). The `semantic` job kind is retired: the extraction
-- such a job was to run again runs in the episode's own job. One whose episode already has its
-- job is redundant; any other becomes that job (released: the lease it had was the old worker's).
DELETE FROM "jobs" s WHERE s."kind" = 'semantic'
  AND EXISTS (SELECT 1 FROM "jobs" e WHERE e."key" = 'episode:' || (s."payload" ->> 'episodeId'));--> statement-breakpoint
UPDATE "jobs" SET "kind" = 'episode', "key" = 'episode:' || ("payload" ->> 'episodeId'), "locked_until" = NULL
  WHERE "kind" = 'semantic';--> statement-breakpoint
-- Work in flight keeps an owner: an episode whose summary or extraction is pending or in
-- processing without a job (left by a dead worker, which the sweep's lease backstops took over
-- before; they are gone) gets its job, due now. Statuses and retry counts are left as they are.
INSERT INTO "jobs" ("id", "kind", "key", "project_id", "dataset", "run_at", "payload", "created_at", "updated_at")
SELECT 'job_' || replace(gen_random_uuid()::text, '-', ''), 'episode', 'episode:' || e."id", e."project_id", e."dataset",
  now(), jsonb_build_object('episodeId', e."id"), now(), now()
FROM "episodes" e
WHERE e."status" IN ('pending', 'processing')
   OR (e."status" = 'completed' AND e."semantic_status" IN ('pending', 'processing'))
ON CONFLICT ("key") DO NOTHING;

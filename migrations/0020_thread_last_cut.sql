ALTER TABLE "threads" ADD COLUMN "last_cut_trigger" text;--> statement-breakpoint
ALTER TABLE "threads" ADD COLUMN "last_cut_at" timestamp with time zone;--> statement-breakpoint
-- A thread's latest cut moves onto its row (lib/episodic/triggers.ts): taken from its latest live
-- episode, which is what the cut read before.
UPDATE "threads" t SET "last_cut_trigger" = latest."trigger", "last_cut_at" = latest."created_at"
FROM (
  SELECT DISTINCT ON (e."thread_id") e."thread_id", e."metadata" ->> 'trigger' AS "trigger", e."created_at"
  FROM "episodes" e
  WHERE e."thread_id" IS NOT NULL AND e."status" NOT IN ('archived', 'deleted')
  ORDER BY e."thread_id", e."created_at" DESC, e."to_seq" DESC
) latest
WHERE t."id" = latest."thread_id";

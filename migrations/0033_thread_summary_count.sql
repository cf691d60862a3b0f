ALTER TABLE "threads" ADD COLUMN "summary_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Counted once here, from the summaries compaction wrote (lib/working/compaction.ts keeps it on).
UPDATE "threads" t SET "summary_count" = s."n"
FROM (SELECT "thread_id", count(*)::int AS "n" FROM "messages" WHERE "is_summary" GROUP BY "thread_id") s
WHERE t."id" = s."thread_id";

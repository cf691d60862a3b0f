ALTER TABLE "threads" ADD COLUMN "compacted_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "threads" ADD COLUMN "live_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "messages_summary_idx" ON "messages" USING btree ("thread_id","seq") WHERE "messages"."is_summary";--> statement-breakpoint
-- Existing threads: their counts as they stand (nothing has been compacted before this version).
UPDATE "threads" t SET "live_count" = (
  SELECT count(*) FROM "messages" m WHERE m."thread_id" = t."id" AND m."compacted_at" IS NULL AND NOT m."is_summary"
);

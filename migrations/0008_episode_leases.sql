ALTER TABLE "episodes" ADD COLUMN "locked_until" timestamp with time zone;--> statement-breakpoint
-- Episodes in flight when this migration runs keep the five-minute lease they were claimed under.
UPDATE "episodes" SET "locked_until" = "updated_at" + interval '5 minutes' WHERE "status" = 'processing' OR "semantic_status" = 'processing';

DROP INDEX "jobs_dataset_idx";--> statement-breakpoint
ALTER TABLE "threads" ADD COLUMN "episode_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "jobs_dataset_idx" ON "jobs" USING btree ("project_id","dataset","kind");
-- Recall looks a query's phrases up by match key within a dataset. The old index led with the
-- tenant's keys, and a plan that guessed the dataset small (no statistics, or statistics taken
-- before it grew) read the dataset's range of an index for them instead of looking each phrase up:
-- 20,000 entities for each recall. The match key now leads, and the tenant's keys are expressions
-- only that lookup writes, so no other index can serve it.
DROP INDEX "entities_match_idx";--> statement-breakpoint
CREATE INDEX "entities_match_key_idx" ON "entities" USING btree ("match_key",("project_id" || ''),("dataset" || ''));

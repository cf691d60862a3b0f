-- The messages' keyword index keyed by the dataset as well (issue 34's many tenants, for messages):
-- a word's posting list in a plain tsvector index spans every tenant's messages, so a small dataset
-- among many read the others' postings of a common word, and their rows to reject them. With
-- btree_gin the project and dataset are a key of the same GIN index, and a lookup intersects the
-- two posting lists (lib/recall/messages.ts, messageDatasetKey). btree_gin ships with PostgreSQL's
-- contrib modules, with PGlite and on Neon.
CREATE EXTENSION IF NOT EXISTS btree_gin;--> statement-breakpoint
CREATE INDEX "message_search_dataset_search_idx" ON "message_search" USING gin (("project_id" || '/' || "dataset"),"search") WITH (gin_pending_list_limit=64);--> statement-breakpoint
-- No statistics for the key: with them, a lone dataset's key matches every row, the plan counts
-- the whole key's posting list as read (the scan skips along it) and takes a sequential scan of
-- the table for each query word instead (1.1 ms a word at 2,000 messages, against 0.03 ms).
ALTER INDEX "message_search_dataset_search_idx" ALTER COLUMN 1 SET STATISTICS 0;--> statement-breakpoint
DROP INDEX "message_search_search_idx";

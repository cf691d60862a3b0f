-- The HNSW candidate list per search: pgvector's default (40) is barely above recall's deepest
-- signal (30 candidates) and lost a third of the true nearest neighbours at 100k facts in the
-- benchmark; 200 keeps most of them for a few milliseconds more. For new sessions and this one.
DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I SET hnsw.ef_search = 200', current_database());
END $$;--> statement-breakpoint
SET hnsw.ef_search = 200;

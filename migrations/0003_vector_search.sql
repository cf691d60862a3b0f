-- Filtered vector searches (a project's and dataset's rows out of the whole table) must still fill
-- their LIMIT: pgvector's iterative index scan keeps walking the HNSW graph until enough rows pass
-- the filter. Set for the database (new sessions) and for the session running the migration.
DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I SET hnsw.iterative_scan = relaxed_order', current_database());
END $$;--> statement-breakpoint
SET hnsw.iterative_scan = relaxed_order;

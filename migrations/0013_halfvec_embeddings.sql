-- Embeddings at half precision (2 bytes per dimension instead of 4: 3 KB at 1536 dimensions). The
-- HNSW indexes over the old columns go first (the table is then rewritten once, not indexed
-- twice); the service creates the new ones after the migrations (lib/db/vector-indexes.ts:
-- half-precision below 1024 dimensions, the vectors' sign bits from 1024 up). Every stored vector
-- is converted (a value beyond half precision's range, 65504, would fail the migration rather
-- than be lost; embeddings are unit vectors).
DO $$
DECLARE index_name text;
BEGIN
  FOR index_name IN
    SELECT indexname FROM pg_indexes
    WHERE schemaname = current_schema() AND indexname ~ '^(facts|entities|episodes)_embedding_hnsw_[0-9]+$'
  LOOP
    EXECUTE format('DROP INDEX %I', index_name);
  END LOOP;
END $$;--> statement-breakpoint
-- A fact or entity row up to half a page (4080 bytes: a 1536-d vector and ~900 bytes of text)
-- stays whole in its page, two to a page, instead of its vector going to TOAST (the default
-- moves it out from 2032 bytes, where its two chunks fill a TOAST page to half, and a search
-- reads them through another index). A larger row still moves its vector out.
-- Set before the conversion, which rewrites the tables under it.
ALTER TABLE "facts" SET (toast_tuple_target = 4080);--> statement-breakpoint
ALTER TABLE "entities" SET (toast_tuple_target = 4080);--> statement-breakpoint
ALTER TABLE "entities" ALTER COLUMN "embedding" SET DATA TYPE halfvec USING "embedding"::halfvec;--> statement-breakpoint
ALTER TABLE "episodes" ALTER COLUMN "embedding" SET DATA TYPE halfvec USING "embedding"::halfvec;--> statement-breakpoint
ALTER TABLE "facts" ALTER COLUMN "embedding" SET DATA TYPE halfvec USING "embedding"::halfvec;--> statement-breakpoint
-- hnsw.ef_search back to pgvector's default (migration 0007 raised it to 200 for every search):
-- recall now sizes it per search from the dataset's size (lib/db/vectors.ts).
DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I RESET hnsw.ef_search', current_database());
END $$;--> statement-breakpoint
RESET hnsw.ef_search;

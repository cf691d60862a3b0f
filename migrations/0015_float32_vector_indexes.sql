-- The HNSW indexes below 1024 dimensions hold vectors in single precision instead of half
-- (lib/db/vector-indexes.ts): in the embedded database's WASM a half-precision distance costs ~3×
-- a single-precision one, and building or searching the graph is mostly distances. The
-- half-precision indexes go here; the service builds the new ones, under the same names, when it
-- starts after the migrations (one pass over the table's vectors). The binary indexes (1024
-- dimensions and up) stay as they are.
DO $$
DECLARE index_name text;
BEGIN
  FOR index_name IN
    SELECT indexname FROM pg_indexes
    WHERE schemaname = current_schema() AND indexname ~ '^(facts|entities|episodes)_embedding_hnsw_[0-9]+$'
      AND indexdef LIKE '%halfvec_cosine_ops%'
  LOOP
    EXECUTE format('DROP INDEX %I', index_name);
  END LOOP;
END $$;

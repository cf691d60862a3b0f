-- The keyword search (recall's BM25 candidates) reads the GIN index's pending list (entries not
-- yet merged into the index) whole on every lookup. Its default limit is 4 MB, and the embedded
-- database runs no autovacuum to merge it: at 10,000 facts a lookup read ~350 pages of it (7.7 ms
-- of a 50 ms recall on the loaded bench machine; 0.08 ms with a 64 kB list). Bulk inserts merge a
-- little more often. The entries pending now are merged here.
ALTER INDEX "facts_search_idx" SET (gin_pending_list_limit = 64);--> statement-breakpoint
SELECT gin_clean_pending_list('facts_search_idx'::regclass);

-- JIT off for the service's sessions: the server compiles a statement whose estimated cost passes
-- jit_above_cost, and recall's estimates over a large dataset pass it although the statement reads
-- a few rows (recall without a query at a million facts: 64 ms p50 with JIT, ~50 of it compiling;
-- 5 ms without). Set for the database, not in each connection's startup packet: a pooler in front
-- of the server (PgBouncer, a managed service's pooler) refuses startup options it does not track, and
-- Neon's HTTP driver has no startup packet at all. For new sessions and this one; a URL's own
-- `options=-c jit=on` still wins (the operator's choice).
DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
END $$;--> statement-breakpoint
SET jit = off;

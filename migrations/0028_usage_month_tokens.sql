-- A project's tokens per calendar month (UTC), kept as the ledger is written, so that a budget
-- check (every chat turn, recall with synthesis and episode claim of a project with a budget) reads
-- a few rows instead of summing the month's usage_events: 382 ms at a million ledger rows on the
-- embedded database. Split by the writing connection (pg_backend_pid() % 16): on a server,
-- concurrent statements of one project mostly add to different rows instead of waiting for each
-- other's commit at one. Unknown (null) and zero counts add nothing.
CREATE TABLE "usage_month_tokens" (
	"project_id" text NOT NULL,
	"month" timestamp with time zone NOT NULL,
	"shard" integer NOT NULL,
	"tokens" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "usage_month_tokens_project_id_month_shard_pk" PRIMARY KEY("project_id","month","shard")
);
--> statement-breakpoint
ALTER TABLE "usage_month_tokens" ADD CONSTRAINT "usage_month_tokens_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- In key order, so two statements adding to the same rows wait for each other instead of deadlocking.
CREATE FUNCTION usage_month_tokens_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO usage_month_tokens AS t (project_id, month, shard, tokens)
  SELECT project_id, date_trunc('month', created_at, 'UTC'), pg_backend_pid() % 16, sum(total_tokens)
  FROM new_rows WHERE total_tokens <> 0
  GROUP BY 1, 2 ORDER BY 1, 2
  ON CONFLICT (project_id, month, shard) DO UPDATE SET tokens = t.tokens + excluded.tokens;
  RETURN NULL;
END $$;--> statement-breakpoint
-- The service never deletes ledger rows but with their project (whose totals go with it); an
-- operator who prunes them keeps the totals equal to what the ledger holds. Taken from one row of
-- the month (the total is the rows' sum, whichever row holds what).
CREATE FUNCTION usage_month_tokens_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE usage_month_tokens t SET tokens = t.tokens - d.tokens
  FROM (SELECT project_id, date_trunc('month', created_at, 'UTC') AS month, sum(total_tokens) AS tokens
    FROM old_rows WHERE total_tokens <> 0 GROUP BY 1, 2) d
  WHERE t.project_id = d.project_id AND t.month = d.month
    AND t.shard = (SELECT min(s.shard) FROM usage_month_tokens s WHERE s.project_id = d.project_id AND s.month = d.month);
  RETURN NULL;
END $$;--> statement-breakpoint
-- The triggers before the sums of the rows already written: creating them locks the ledger against
-- writes until this migration commits, so no row is counted twice or missed.
CREATE TRIGGER usage_events_month_tokens_insert AFTER INSERT ON usage_events REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION usage_month_tokens_on_insert();--> statement-breakpoint
CREATE TRIGGER usage_events_month_tokens_delete AFTER DELETE ON usage_events REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION usage_month_tokens_on_delete();--> statement-breakpoint
INSERT INTO usage_month_tokens (project_id, month, shard, tokens)
SELECT project_id, date_trunc('month', created_at, 'UTC'), 0, sum(total_tokens)
FROM usage_events WHERE total_tokens <> 0 GROUP BY 1, 2;

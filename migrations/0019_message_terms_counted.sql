-- Keyword statistics of messages counted off the write path (issue 32): rows the old insert
-- trigger counted read true (the column is added with default true, then the default becomes
-- false for the rows written from now on, which the thread's message-embed job counts:
-- lib/evidence/terms.ts).
ALTER TABLE "message_search" ADD COLUMN "terms_counted" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "message_search" ALTER COLUMN "terms_counted" SET DEFAULT false;--> statement-breakpoint
DROP TRIGGER message_search_terms_insert ON message_search;--> statement-breakpoint
DROP FUNCTION message_terms_on_insert();--> statement-breakpoint
-- Subtracts only the rows whose terms were counted. Exact under concurrency: the job's UPDATE
-- of a row and a DELETE of it serialize on the row's lock; a DELETE that waited deletes (and
-- sees in old_rows) the version the UPDATE left, and the job skips a row a DELETE holds. A
-- project's deletion cascades to its threads (and so to these rows) after its statistics are
-- gone: nothing to subtract.
CREATE OR REPLACE FUNCTION message_terms_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH gone AS (
    SELECT * FROM old_rows o WHERE o.terms_counted AND EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id))
  INSERT INTO message_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM gone c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM gone c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;

-- A term's statistics row goes once no fact (no counted message) of its dataset holds the term:
-- the delete triggers kept it at zero, so an erased dataset's words, or a deleted fact's, stayed
-- in fact_terms and message_terms (SECURITY.md: "deleted with the facts", "with the messages").
-- A second statement of each trigger deletes the rows its subtraction brought to zero; it sees
-- the first's effects, and a concurrent insert of the term (an upsert) waits on the row's lock
-- and then inserts it anew.
CREATE OR REPLACE FUNCTION fact_terms_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT * FROM old_facts o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT * FROM old_facts o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  DELETE FROM fact_terms t USING (
    SELECT DISTINCT o.project_id, o.dataset, u.lexeme AS term FROM old_facts o, unnest(o.search) u
    UNION SELECT DISTINCT o.project_id, o.dataset, '' FROM old_facts o) x
  WHERE t.project_id = x.project_id AND t.dataset = x.dataset AND t.term = x.term AND t.docs <= 0;
  RETURN NULL;
END $$;--> statement-breakpoint
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
  DELETE FROM message_terms t USING (
    SELECT DISTINCT o.project_id, o.dataset, u.lexeme AS term FROM old_rows o, unnest(o.search) u WHERE o.terms_counted
    UNION SELECT DISTINCT o.project_id, o.dataset, '' FROM old_rows o WHERE o.terms_counted) x
  WHERE t.project_id = x.project_id AND t.dataset = x.dataset AND t.term = x.term AND t.docs <= 0;
  RETURN NULL;
END $$;--> statement-breakpoint
-- The rows the old triggers left at zero.
DELETE FROM fact_terms WHERE docs <= 0;--> statement-breakpoint
DELETE FROM message_terms WHERE docs <= 0;

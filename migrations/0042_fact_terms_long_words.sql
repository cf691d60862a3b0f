-- A fact's words over 1,000 bytes (a hash, a base64 blob in its quote) stay out of its dataset's
-- keyword statistics, as a message's do (lib/evidence/write.ts, INDEX_LEXEME_MAX_BYTES). The
-- statistics' key (project, dataset, term) is a B-tree entry of at most 2,704 bytes: a 2,000-letter
-- word in a dataset with a long multi-byte name failed its fact's insert, and with it every retry
-- of the episode's extraction. No such row could be written before, so none needs removing; the
-- document length (the '' row) still counts every lexeme, as the fact's own search vector does.
CREATE OR REPLACE FUNCTION fact_terms_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM new_facts c, unnest(c.search) u
      WHERE octet_length(u.lexeme) <= 1000
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM new_facts c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION fact_terms_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT * FROM old_facts o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c, unnest(c.search) u
      WHERE octet_length(u.lexeme) <= 1000
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT * FROM old_facts o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  DELETE FROM fact_terms t USING (
    SELECT DISTINCT o.project_id, o.dataset, u.lexeme AS term FROM old_facts o, unnest(o.search) u
      WHERE octet_length(u.lexeme) <= 1000
    UNION SELECT DISTINCT o.project_id, o.dataset, '' FROM old_facts o) x
  WHERE t.project_id = x.project_id AND t.dataset = x.dataset AND t.term = x.term AND t.docs <= 0;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION fact_terms_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT o.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c, unnest(c.search) u
      WHERE octet_length(u.lexeme) <= 1000
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT o.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT n.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c, unnest(c.search) u
      WHERE octet_length(u.lexeme) <= 1000
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT n.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;

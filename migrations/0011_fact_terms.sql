CREATE TABLE "fact_terms" (
	"project_id" text NOT NULL,
	"dataset" text NOT NULL,
	"term" text NOT NULL,
	"docs" bigint NOT NULL,
	"lexemes" bigint NOT NULL,
	CONSTRAINT "fact_terms_project_id_dataset_term_pk" PRIMARY KEY("project_id","dataset","term")
);
--> statement-breakpoint
ALTER TABLE "facts" drop column "search";--> statement-breakpoint
ALTER TABLE "facts" ADD COLUMN "search" "tsvector" GENERATED ALWAYS AS (to_tsvector('english', subject || ' ' || predicate || ' ' || object || ' ' || source_quote)) STORED;--> statement-breakpoint
ALTER TABLE "fact_terms" ADD CONSTRAINT "fact_terms_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Dropping the column dropped its index; the keyword search needs it back.
CREATE INDEX "facts_search_idx" ON "facts" USING gin ("search");--> statement-breakpoint
-- BM25 statistics kept by statement-level triggers: one upsert per statement whatever the number
-- of facts it writes; terms in key order, so concurrent writers lock the rows in the same order.
-- (The statements are written out in each function: a transition table is visible only to the
-- trigger function's own queries.)
CREATE FUNCTION fact_terms_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM new_facts c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM new_facts c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;--> statement-breakpoint
-- A project's deletion cascades to its facts after its statistics are gone: nothing to subtract.
CREATE FUNCTION fact_terms_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT * FROM old_facts o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT * FROM old_facts o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;--> statement-breakpoint
-- Facts are not rewritten today (only their validity changes); if one ever is, its terms move.
CREATE FUNCTION fact_terms_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT o.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT o.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT n.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT n.* FROM old_facts o JOIN new_facts n USING (id) WHERE o.search IS DISTINCT FROM n.search OR o.dataset <> n.dataset) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER facts_terms_insert AFTER INSERT ON facts REFERENCING NEW TABLE AS new_facts
  FOR EACH STATEMENT EXECUTE FUNCTION fact_terms_on_insert();--> statement-breakpoint
CREATE TRIGGER facts_terms_delete AFTER DELETE ON facts REFERENCING OLD TABLE AS old_facts
  FOR EACH STATEMENT EXECUTE FUNCTION fact_terms_on_delete();--> statement-breakpoint
CREATE TRIGGER facts_terms_update AFTER UPDATE ON facts REFERENCING OLD TABLE AS old_facts NEW TABLE AS new_facts
  FOR EACH STATEMENT EXECUTE FUNCTION fact_terms_on_update();--> statement-breakpoint
-- The facts written before this migration.
  INSERT INTO fact_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM facts c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM facts c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;

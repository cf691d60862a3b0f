CREATE TABLE "message_search" (
	"message_id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"thread_id" text NOT NULL,
	"dataset" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"search" "tsvector" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "message_terms" (
	"project_id" text NOT NULL,
	"dataset" text NOT NULL,
	"term" text NOT NULL,
	"docs" bigint NOT NULL,
	"lexemes" bigint NOT NULL,
	CONSTRAINT "message_terms_project_id_dataset_term_pk" PRIMARY KEY("project_id","dataset","term")
);
--> statement-breakpoint
CREATE TABLE "message_vectors" (
	"message_id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"thread_id" text NOT NULL,
	"dataset" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"embedding" halfvec NOT NULL
);
--> statement-breakpoint
ALTER TABLE "message_search" ADD CONSTRAINT "message_search_thread_id_threads_id_fk" FOREIGN KEY ("thread_id") REFERENCES "public"."threads"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_terms" ADD CONSTRAINT "message_terms_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_vectors" ADD CONSTRAINT "message_vectors_thread_id_threads_id_fk" FOREIGN KEY ("thread_id") REFERENCES "public"."threads"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "message_search_dataset_idx" ON "message_search" USING btree ("project_id","dataset","created_at");--> statement-breakpoint
CREATE INDEX "message_search_thread_idx" ON "message_search" USING btree ("thread_id");--> statement-breakpoint
CREATE INDEX "message_search_search_idx" ON "message_search" USING gin ("search") WITH (gin_pending_list_limit=64);--> statement-breakpoint
CREATE INDEX "message_vectors_thread_idx" ON "message_vectors" USING btree ("thread_id");--> statement-breakpoint
-- BM25 statistics for messages, kept as fact_terms is (0011): one upsert per statement whatever
-- the number of messages it indexes, terms in key order. Index rows are never updated (a message
-- is immutable and its index row with it), so there is no update trigger.
CREATE FUNCTION message_terms_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO message_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM new_rows c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM new_rows c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;--> statement-breakpoint
-- A project's deletion cascades to its threads (and so to these rows) after its statistics are
-- gone: nothing to subtract.
CREATE FUNCTION message_terms_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO message_terms AS t (project_id, dataset, term, docs, lexemes)
  SELECT project_id, dataset, term, -sum(docs), -sum(lexemes) FROM (
    SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM (SELECT * FROM old_rows o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c, unnest(c.search) u
    UNION ALL
    SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM (SELECT * FROM old_rows o WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = o.project_id)) c) x
  GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
  ON CONFLICT (project_id, dataset, term)
  DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER message_search_terms_insert AFTER INSERT ON message_search REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION message_terms_on_insert();--> statement-breakpoint
CREATE TRIGGER message_search_terms_delete AFTER DELETE ON message_search REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION message_terms_on_delete();--> statement-breakpoint
-- The messages written before this migration: the users' (the default of what is indexed,
-- lib/evidence/index.ts), searchable by keyword at once; their embeddings come from one job per
-- thread, due now.
INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search)
SELECT m.id, m.project_id, m.thread_id, t.dataset, m.created_at, to_tsvector('english', left(m.content, 20000))
FROM messages m JOIN threads t ON t.id = m.thread_id
WHERE m.role = 'user' AND NOT m.is_summary;--> statement-breakpoint
INSERT INTO jobs (id, kind, key, project_id, dataset, run_at, payload, created_at, updated_at)
SELECT 'job_' || replace(gen_random_uuid()::text, '-', ''), 'message-embed', 'embed:' || t.id, t.project_id, t.dataset,
  now(), jsonb_build_object('threadId', t.id), now(), now()
FROM threads t WHERE EXISTS (SELECT 1 FROM message_search s WHERE s.thread_id = t.id)
ON CONFLICT (key) DO NOTHING;

-- A thread's `message-embed` job looked for its messages without a vector, and for index rows not
-- yet counted into the keyword statistics, among all of the thread's index rows: each run read the
-- whole thread, so a long-lived thread (one per user, tens of thousands of messages) paid for its
-- length on every run. It now reads above `embedded_seq` only: below it every indexed message has
-- its vector and is counted. A thread written before this migration starts just below its first
-- indexed message lacking either, or at its last message.
ALTER TABLE "threads" ADD COLUMN "embedded_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE "threads" t SET "embedded_seq" = coalesce(
  (SELECT min(m.seq) - 1 FROM "message_search" s JOIN "messages" m ON m.id = s.message_id
    WHERE s.thread_id = t.id
      AND (NOT s.terms_counted OR NOT EXISTS (SELECT 1 FROM "message_vectors" v WHERE v.message_id = s.message_id))),
  t.last_seq);

import { sql } from "drizzle-orm";
import type { Db } from "../../lib/db/types";
import { addTermsSql } from "../../lib/evidence/terms";
import { fakeEmbedding } from "./fake-openai";

/** A user message to write straight into the tables, `ageSeconds` before the database's now(). */
export interface IndexedMessage {
  id: string;
  content: string;
  ageSeconds: number;
}

/**
 * `messages` as user messages of the existing thread `threadId` (seq from `firstSeq`), indexed as
 * its jobs leave them, in one statement: thousands of them in a moment, where the API would take
 * one request each. Their search rows are counted into the dataset's keyword statistics unless
 * `counted` is false; with `dims`, they are embedded too (fakeEmbedding, as the fake provider).
 */
export async function insertIndexedMessages(
  db: Db,
  at: { projectId: string; dataset: string; threadId: string; firstSeq: number },
  messages: IndexedMessage[],
  options: { counted?: boolean; dims?: number } = {},
): Promise<void> {
  const { counted = true, dims } = options;
  const rows = messages.map((m, i) => ({
    ...m,
    seq: at.firstSeq + i,
    v: dims ? `[${fakeEmbedding(m.content, dims).join(",")}]` : null,
  }));
  const vectors = dims
    ? sql`INSERT INTO message_vectors (message_id, project_id, thread_id, dataset, created_at, embedding)
        SELECT s.id, s.project_id, s.thread_id, s.dataset, s.created_at, x.v::halfvec FROM s JOIN x ON x.id = s.id`
    : sql`SELECT 1`;
  await db.execute(sql`
    WITH x AS (SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        AS x(id text, content text, "ageSeconds" float8, seq int, v text)),
      m AS (INSERT INTO messages (id, project_id, thread_id, seq, role, content, created_at)
        SELECT x.id, ${at.projectId}, ${at.threadId}, x.seq, 'user', x.content, now() - make_interval(secs => x."ageSeconds")
        FROM x RETURNING id, thread_id, project_id, content, created_at),
      s AS (INSERT INTO message_search (message_id, project_id, thread_id, dataset, created_at, search, terms_counted)
        SELECT m.id, m.project_id, m.thread_id, ${at.dataset}, m.created_at, to_tsvector('english', m.content), ${counted}
        FROM m RETURNING message_id AS id, project_id, thread_id, dataset, created_at, search, terms_counted),
      sc AS (SELECT * FROM s WHERE terms_counted),
      t AS (${addTermsSql(sql`sc`)}),
      -- As an append leaves its thread: its last number at least the messages' own.
      th AS (UPDATE threads SET last_seq = greatest(last_seq, (SELECT max(seq) FROM x)) WHERE id = ${at.threadId})
    ${vectors}`);
}

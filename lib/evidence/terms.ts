import { type SQL, sql } from "drizzle-orm";
import { messageSearch, messages, messageTerms, threads } from "../db/schema";

/**
 * Adds to `message_terms` the terms of `rows` (a CTE or table with project_id, dataset and
 * search): per dataset, for each term the rows holding it (`docs`), and on the '' row the rows and
 * their lexemes. In key order, as the delete trigger subtracts them
 * (migrations/0019_message_terms_counted.sql), so two upserts of the same terms wait for each
 * other instead of deadlocking.
 */
export function addTermsSql(rows: SQL): SQL {
  return sql`INSERT INTO ${messageTerms} AS t (project_id, dataset, term, docs, lexemes)
      SELECT project_id, dataset, term, sum(docs), sum(lexemes) FROM (
        SELECT c.project_id, c.dataset, u.lexeme AS term, 1 AS docs, 0 AS lexemes FROM ${rows} c, unnest(c.search) u
        UNION ALL
        SELECT c.project_id, c.dataset, '', 1, length(c.search) FROM ${rows} c) x
      GROUP BY project_id, dataset, term ORDER BY project_id, dataset, term
      ON CONFLICT (project_id, dataset, term)
      DO UPDATE SET docs = t.docs + excluded.docs, lexemes = t.lexemes + excluded.lexemes`;
}

/**
 * CTEs that count a thread's index rows not yet counted into its dataset's keyword statistics,
 * off the write path (the thread's `message-embed` job runs them, ./embed.ts): `counted` marks
 * them (`terms_counted`) and `counted_terms` adds their terms, in the same statement, so a row is
 * in the statistics exactly when it reads true (the delete trigger subtracts only those).
 *
 * Only the `window` first rows above the thread's `embedded_seq` are read (`above`, with their
 * sequence numbers): below it the job has counted and embedded every indexed message, and it
 * works through the rest a window a run, so a run costs at most a window, not the thread's length
 * or an import's backlog (20,000 rows counted at once held the embedded database for 1.9 s). The
 * job stops its batches below a row this count skipped (./embed.ts), so the mark never passes a
 * row left uncounted. `after`: the window above that number instead (a run whose embedding failed
 * counts on past its own window, as the mark then stays: ./embed.ts).
 *
 * Locks, so that it never deadlocks with a deletion (which takes index rows, then statistics
 * rows in its trigger). First the thread's row, FOR KEY SHARE (a thread's deletion, as a
 * dataset's erase does, conflicts with it; a message's append does not): a deletion that came
 * first keeps this statement waiting before it holds anything; one that comes later waits at the
 * thread's row, before it holds an index or a statistics row. Then the thread's index rows,
 * skipping those a deletion in flight holds (a forgotten fact's messages: they are going, and if
 * that deletion rolls back they stay uncounted until the thread's next job), so this statement
 * never waits for an index row while holding others. A row counted meanwhile (by a run of the
 * job past its lease) is not counted twice: taking its lock re-reads `terms_counted`.
 */
export function countThreadTermsCtes(threadId: string, window: number, after?: SQL): SQL {
  return sql`above AS MATERIALIZED (${aboveMarkSql(threadId, after)} ORDER BY m.seq LIMIT ${window}),
    counted AS (
      UPDATE ${messageSearch} s SET terms_counted = true
      WHERE s.message_id = ANY (ARRAY(
          SELECT u.message_id FROM ${messageSearch} u
          WHERE u.message_id IN (SELECT id FROM above WHERE NOT terms_counted)
            AND u.thread_id = (SELECT th.id FROM ${threads} th WHERE th.id = ${threadId} FOR KEY SHARE)
            AND NOT u.terms_counted
          FOR NO KEY UPDATE SKIP LOCKED))
        AND NOT s.terms_counted
      RETURNING s.message_id, s.project_id, s.dataset, s.search),
    counted_terms AS (${addTermsSql(sql`counted`)})`;
}

/**
 * The thread's indexed messages numbered above `above` (by default its `embedded_seq`): id, seq
 * and whether counted. Bounded above by the thread's last number too (true of every message): a
 * range between two values unknown when the statement is planned is estimated as narrow, so the
 * planner reads it through the (thread_id, seq) index; with the lower bound alone it guesses a
 * third of the thread, and on a thread that holds most of the table it reads them all.
 */
export function aboveMarkSql(
  threadId: string,
  above: SQL = sql`(SELECT embedded_seq FROM ${threads} WHERE id = ${threadId})`,
): SQL {
  return sql`SELECT m.id, m.seq, s.terms_counted
    FROM ${messages} m JOIN ${messageSearch} s ON s.message_id = m.id
    WHERE m.thread_id = ${threadId} AND m.seq > ${above}
      AND m.seq <= (SELECT last_seq FROM ${threads} WHERE id = ${threadId})`;
}

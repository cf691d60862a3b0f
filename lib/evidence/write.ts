import { type SQL, sql } from "drizzle-orm";
import { messageSearch, messages, messageVectors, projects } from "../db/schema";
import { jobWaitingSql, scheduleJobsSql } from "../jobs/schedule";
import { projectSetting } from "../settings/sql";

/**
 * What of a message the keyword index reads: its first 20,000 characters. A tsvector holds at
 * most 1 MB and a message may be as long as a request (1 MB), so the whole text could fail the
 * insert; the evidence a question needs is in the part of a turn a reader sees first.
 */
export const MESSAGE_INDEX_CHARS = 20_000;

/**
 * The longest lexeme a message's index row keeps, in bytes. Each lexeme is a row of its dataset's
 * keyword statistics, whose key (project, dataset, term) a B-tree holds in at most 2,704 bytes:
 * a 2,000-letter word (a hash, a base64 blob) in a dataset with a long multi-byte name made the
 * thread's embedding job fail on every run, and none of its later messages got a vector. No word
 * a question would reuse is this long.
 */
export const INDEX_LEXEME_MAX_BYTES = 1_000;

/** The keyword index's vector of `text`: English, its first MESSAGE_INDEX_CHARS, no lexeme over INDEX_LEXEME_MAX_BYTES. */
export function messageSearchSql(text: SQL): SQL {
  return sql`(SELECT ts_delete(v, ARRAY(SELECT u.lexeme FROM unnest(v) u
      WHERE octet_length(u.lexeme) > ${sql.raw(String(INDEX_LEXEME_MAX_BYTES))}))
    FROM (SELECT to_tsvector('english', left(${text}, ${sql.raw(String(MESSAGE_INDEX_CHARS))})) AS v) lexemes)`;
}

/**
 * How long after a thread's last write its messages are embedded (the debounce), and the longest
 * a message waits while the thread keeps being written to.
 */
export const EMBED_DEBOUNCE_MS = 2_000;
export const EMBED_MAX_WAIT_MS = 6_000;

/**
 * Whether a message of `role` is indexed, as SQL over the project's settings `p.settings`: the
 * user's always, the assistant's when the project says so; system prompts, tool output and
 * compaction summaries never (docs/memory.md says why).
 */
function indexedRoleSql(role: SQL): SQL {
  const assistant = projectSetting("semantic", "indexAssistantMessages", sql`p.settings`, "boolean");
  return sql`(${role} = 'user' OR (${role} = 'assistant' AND ${assistant}))`;
}

/**
 * CTEs folded into the statement that inserts messages, so a message is searchable by keyword
 * when its insert commits: `indexed`, its keyword index row (its terms are counted into the
 * dataset's statistics later, off the write path, by the job below: ./terms.ts), and `embed_job`,
 * the thread's embedding job, armed once (a waiting job is not pushed back by every message: it
 * re-reads the thread's last write when it fires, see ./embed.ts), with the time it was armed so
 * a busy thread still waits at most EMBED_MAX_WAIT_MS. A job a worker holds is armed again under
 * its lease (`rearm`): that run may have read the thread before this message, and its end would
 * otherwise delete the job this message relied on. `msg` must expose the new messages' id,
 * thread_id, role, content and created_at; `th` the threads' id, project_id and dataset.
 * `embed_job` returns key and run_at, for the doorbell.
 */
export function indexMessagesCtes(now: string): SQL {
  const runAt = new Date(Date.parse(now) + EMBED_DEBOUNCE_MS).toISOString();
  return sql`indexed AS (
      INSERT INTO ${messageSearch} (message_id, project_id, thread_id, dataset, created_at, search)
      SELECT m.id, th.project_id, th.id, th.dataset, m.created_at, ${messageSearchSql(sql`m.content`)}
      FROM msg m JOIN th ON th.id = m.thread_id JOIN ${projects} p ON p.id = th.project_id
      WHERE ${indexedRoleSql(sql`m.role`)}
      RETURNING thread_id),
    embed_job AS (${scheduleJobsSql({
      kind: "message-embed",
      row: sql`th`,
      runAt: sql`${runAt}::timestamptz`,
      from: sql`FROM th WHERE th.id IN (SELECT thread_id FROM indexed) AND NOT ${jobWaitingSql("message-embed", sql`th.id`, now)}`,
      now,
      mode: "rearm",
      payload: { armedAt: now },
    })})`;
}

/**
 * Whitespace as recall's quote check sees it (JavaScript's `\s`, quoteComparable below): the body
 * of a bracket expression, and a run of it, spelled out in a syntax both JavaScript (`u` flag) and
 * PostgreSQL's regexps read alike. PostgreSQL's own `\s` follows the database's locale (ASCII
 * alone under C, as on the embedded database), so a message with a non-breaking space where its
 * fact's quote had a space was not found when the fact was forgotten, and recall, no longer
 * skipping it, returned it.
 */
export const WHITESPACE_CHARS =
  "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff";
export const WHITESPACE_RUN = `[${WHITESPACE_CHARS}]+`;

/**
 * Quotation marks a quote is compared without: a model writes ' where the user's keyboard typed
 * ’, and drops the quotes around a name ("Biscuit"). Extraction already accepted a quote without
 * them, while forgetting and recall's skip compared them as they were, so a forgotten fact's
 * message stayed in recall.
 */
export const QUOTE_MARKS = "\u2018\u2019\u201c\u201d\"'`";
const QUOTE_MARK = new RegExp(`[${QUOTE_MARKS}]`, "gu");

/**
 * Text as a quote is compared (extraction's check of a fact's quote, recall's skip of a message a
 * fact quotes, forgetting's match: unindexQuotingMessagesCtes): lower case, without quotation
 * marks, each run of whitespace one space, trimmed.
 */
export const quoteComparable = (text: string) =>
  text.toLowerCase().replace(QUOTE_MARK, "").replace(/\s+/gu, " ").trim();

/**
 * CTEs that take out of the conversation index the messages that said what a forgotten fact
 * holds: those of its dataset whose text contains its source quote, compared as extraction and
 * recall compare a quote (quoteComparable; `lower` folds as JavaScript does for the letters the
 * embedded database's C locale knows, ASCII). Without them, forgetting
 * "I live in Lisbon" would bring the user's own words back into recall, now unquoted. The
 * messages stay in their thread and in the export. `forgotten` must expose project_id, dataset
 * and source_quote; the keyword index narrows the candidates before the text is compared.
 */
export function unindexQuotingMessagesCtes(): SQL {
  const comparable = (text: SQL) =>
    sql`lower(btrim(regexp_replace(translate(${text}, ${QUOTE_MARKS}::text, ''), ${WHITESPACE_RUN}, ' ', 'g')))`;
  return sql`quoting AS (
      SELECT s.message_id FROM forgotten f
      JOIN ${messageSearch} s ON s.project_id = f.project_id AND s.dataset = f.dataset
        AND s.search @@ plainto_tsquery('english', f.source_quote)
      JOIN ${messages} m ON m.id = s.message_id
      WHERE ${comparable(sql`f.source_quote`)} <> ''
        AND strpos(${comparable(sql`m.content`)}, ${comparable(sql`f.source_quote`)}) > 0),
    unindexed_vectors AS (DELETE FROM ${messageVectors} WHERE message_id IN (SELECT message_id FROM quoting)),
    unindexed AS (DELETE FROM ${messageSearch} WHERE message_id IN (SELECT message_id FROM quoting))`;
}

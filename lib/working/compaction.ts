import { type SQL, sql } from "drizzle-orm";
import { jsonOf, rowsOf } from "../db/rows";
import { messages, projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import { notFound } from "../errors";
import { newId } from "../ids";
import { COMPACTION_PROMPT } from "../llm/prompts";
import { projectSetting } from "../settings/sql";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";

/** Compaction always leaves this many of the newest un-compacted messages as they are. */
export const COMPACT_KEEP_RECENT = 6;
/** At most this many messages are folded by one compaction (one model call); a later one folds on. */
export const COMPACT_MAX_FOLD = 500;

export interface Compacted {
  threadId: string;
  summaryMessageId: string;
  compactedCount: number;
  fromSequence: number;
  toSequence: number;
}

export interface NothingToCompact {
  ok: true;
  compacted: false;
  message: string;
}

/**
 * The project's autoCompactThreshold inside a statement (null: auto-compaction off), so the
 * statement that inserts a message can tell whether it crossed it.
 */
export function autoCompactThresholdSql(projectId: string): SQL {
  return sql`(SELECT ${projectSetting("working", "autoCompactThreshold", sql`${projects.settings}`, "int")}
    FROM ${projects} WHERE ${projects.id} = ${projectId})`;
}

/**
 * Whether an insert that left `liveCount` un-compacted messages compacts inline: when it reaches
 * the threshold, and again at each multiple of it while an earlier attempt has failed (so a
 * provider outage costs a model call every `threshold` messages, not on every insert).
 */
export function crossesThreshold(liveCount: number, threshold: number | null): boolean {
  return threshold !== null && liveCount >= threshold && liveCount % threshold === 0;
}

interface FoldRow {
  seq: number;
  role: string;
  content: string;
}

/**
 * Folds the thread's older un-compacted messages (all but the newest COMPACT_KEEP_RECENT, at
 * most COMPACT_MAX_FOLD) and its active summary into one new summary message: one statement to
 * read, one model call, one statement to write. The write lands only if no other compaction of
 * the thread landed since the read (`compacted_seq` unchanged, checked under the thread's row
 * lock), so two racing compactions never fold the same messages: the loser writes nothing and
 * answers the nothing-to-compact shape. The summary takes the next sequence number, role
 * `system`; the folded rows (and the previous summary) get `compactedAt`.
 */
export async function compactThread(
  deps: Deps,
  projectId: string,
  threadId: string,
): Promise<Compacted | NothingToCompact> {
  const [state] = rowsOf<{
    compacted_seq: number;
    live_count: number;
    summary_id: string | null;
    summary_content: string | null;
    summary_from: number | null;
    fold: FoldRow[] | string;
  }>(
    await deps.db.execute(sql`
      WITH t AS (
        SELECT id, compacted_seq, live_count FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}),
      summary AS (
        SELECT id, content, summary_from_seq FROM ${messages}
        WHERE thread_id = (SELECT id FROM t) AND seq > (SELECT compacted_seq FROM t) AND is_summary AND compacted_at IS NULL
        ORDER BY seq DESC LIMIT 1),
      fold AS (
        SELECT seq, role, content FROM ${messages}
        WHERE thread_id = (SELECT id FROM t) AND seq > (SELECT compacted_seq FROM t)
          AND compacted_at IS NULL AND NOT is_summary
        ORDER BY seq LIMIT LEAST(GREATEST((SELECT live_count FROM t) - ${COMPACT_KEEP_RECENT}, 0), ${COMPACT_MAX_FOLD}))
      SELECT t.compacted_seq, t.live_count, s.id AS summary_id, s.content AS summary_content,
        s.summary_from_seq AS summary_from,
        coalesce((SELECT json_agg(json_build_object('seq', seq, 'role', role, 'content', content) ORDER BY seq) FROM fold), '[]'::json) AS fold
      FROM t LEFT JOIN summary s ON true`),
  );
  if (!state) throw notFound("Thread not found");
  const fold = jsonOf(state.fold);
  if (fold.length === 0) {
    return {
      ok: true,
      compacted: false,
      message: `Nothing to compact: ${Number(state.live_count)} message(s) not yet compacted, and the newest ${COMPACT_KEEP_RECENT} are always kept`,
    };
  }

  const transcript = fold.map((m) => `[${m.seq}] ${m.role}: ${m.content.replace(/\s+/g, " ")}`).join("\n");
  const completion = await deps.llm.complete({
    system: COMPACTION_PROMPT,
    messages: [
      {
        role: "user",
        content: state.summary_content
          ? `Earlier summary:\n${state.summary_content}\n\nConversation since:\n${transcript}`
          : `Conversation:\n${transcript}`,
      },
    ],
  });

  const expected = Number(state.compacted_seq);
  const toSeq = Number(fold[fold.length - 1].seq);
  const fromSeq = state.summary_from === null ? Number(fold[0].seq) : Number(state.summary_from);
  const now = deps.clock.now().toISOString();
  const summaryId = newId("msg");
  const [written] = rowsOf<{ summary_id: string | null; webhook_jobs: unknown }>(
    await deps.db.execute(sql`
      WITH claim AS (
        UPDATE ${threads}
        SET compacted_seq = ${toSeq}, live_count = live_count - ${fold.length}, last_seq = last_seq + 1,
          updated_at = ${now}::timestamptz
        WHERE id = ${threadId} AND project_id = ${projectId} AND compacted_seq = ${expected}
        RETURNING id, dataset, last_seq),
      folded AS (
        UPDATE ${messages} SET compacted_at = ${now}::timestamptz
        WHERE thread_id = (SELECT id FROM claim) AND compacted_at IS NULL
          AND ((seq > ${expected} AND seq <= ${toSeq} AND NOT is_summary) OR id = ${state.summary_id})
        RETURNING id),
      summary AS (
        INSERT INTO ${messages} (id, project_id, thread_id, seq, role, content, is_summary, summary_from_seq,
                                 summary_to_seq, model, tokens, created_at)
        SELECT ${summaryId}, ${projectId}, claim.id, claim.last_seq, 'system', ${completion.text.trim()}, true,
          ${fromSeq}, ${toSeq}, ${completion.model}, ${JSON.stringify(completion.tokens)}::jsonb, ${now}::timestamptz
        FROM claim
        RETURNING id),
      ${webhookEventCtes(
        "thread.compacted",
        sql`SELECT ${projectId}::text AS project_id, jsonb_build_object('threadId', claim.id, 'dataset', claim.dataset,
          'summaryMessageId', ${summaryId}::text, 'compactedCount', ${fold.length}::int, 'fromSequence', ${fromSeq}::int,
          'toSequence', ${toSeq}::int) AS data FROM claim`,
        now,
      )}
      SELECT (SELECT id FROM summary) AS summary_id, (SELECT count(*) FROM folded) AS folded,
        ${webhookJobsColumn} AS webhook_jobs`),
  );
  ringWebhookJobs(deps, written?.webhook_jobs);
  if (!written?.summary_id) {
    return {
      ok: true,
      compacted: false,
      message: "Nothing to compact: another compaction of this thread landed first",
    };
  }
  return {
    threadId,
    summaryMessageId: summaryId,
    compactedCount: fold.length,
    fromSequence: fromSeq,
    toSequence: toSeq,
  };
}

import { sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext, ReadContext } from "../context";
import { dbInt, dbJson, dbNumber, dbTimestamp, dbTimestampSet, parsedRowsOf, toIso } from "../db/rows";
import { messages, threads } from "../db/schema";
import { dueJobsFrom, idleJobSql, ringLater } from "../episodic/triggers";
import { notFound } from "../errors";
import { indexMessagesCtes } from "../evidence/write";
import { type Claim, claimWroteSql } from "../idempotency";
import { newId } from "../ids";
import { dueJobsFromJson, dueJobsJson } from "../jobs/schedule";
import { MESSAGE_ROLES, type MessageRole, messageRole, perRole } from "../roles";
import { budgetSpentSql } from "../usage/budget";
import type { UsageCollector } from "../usage/collector";
import { withUsage } from "../usage/sql";
import { autoCompactThresholdSql, compactAfterWrite, crossesThreshold, inlineCompactionDeadline } from "./compaction";

export interface MessageInput {
  role: MessageRole;
  content: string;
  tokens?: { input?: number; output?: number; total?: number };
  model?: string;
  latencyMs?: number;
  metadata?: { stopReason?: string; agentName?: string };
}

/**
 * Appends a message in one statement: the thread's counter is bumped (which row-locks the thread,
 * so concurrent appends queue) and its new value is the message's sequence number. Gapless and
 * ordered by insert; no row when the thread is not in the project.
 */
export async function addMessage(
  ctx: ProjectContext,
  {
    threadId,
    usage,
    usageDataset,
    claim,
    ...input
  }: MessageInput & {
    threadId: string;
    usage?: UsageCollector;
    /**
     * The dataset `usage` is recorded under when the caller knows it (a chat's turn read it): a
     * thread erased meanwhile stores no message, but its call still counts for its dataset.
     */
    usageDataset?: string;
    /** A keyed chat's claim: the statement records on it that the message is stored. */
    claim?: Claim;
  },
) {
  const { deps, projectId } = ctx;
  const now = deps.clock.now().toISOString();
  const tokens = jsonOrNull(input.tokens);
  const metadata = jsonOrNull(input.metadata);
  const result = await deps.db.execute(sql`
    WITH th AS (
      UPDATE ${threads} SET last_seq = last_seq + 1, live_count = live_count + 1,
        -- The clock was read before the row was locked; a concurrent append may have committed a
        -- later time, and a thread's message times never go back.
        last_message_at = greatest(last_message_at, ${now}::timestamptz), updated_at = ${now}::timestamptz
      WHERE id = ${threadId} AND project_id = ${projectId}
      RETURNING id, project_id, dataset, settings, last_seq, live_count, compact_failed_count, last_message_at
    ),
    msg AS (
      INSERT INTO ${messages} (id, project_id, thread_id, seq, role, content, tokens, model, latency_ms, metadata, created_at)
      SELECT ${newId("msg")}, ${projectId}, th.id, th.last_seq, ${input.role}, ${input.content},
             ${tokens}::jsonb, ${input.model ?? null},
             ${input.latencyMs ?? null}::real, ${metadata}::jsonb,
             th.last_message_at
      FROM th
      RETURNING id, thread_id, seq, role, content, created_at
    )${withUsage(usage, { projectId, dataset: usageDataset ?? sql`(SELECT dataset FROM th)` }, now)},
    ${indexMessagesCtes(now)},
    timer AS (${idleJobSql(now)})${claim ? sql`, wrote AS (${claimWroteSql(claim, now, sql`EXISTS (SELECT 1 FROM msg)`)})` : sql``}
    SELECT msg.id, msg.thread_id, msg.seq, msg.role, msg.created_at,
      (SELECT key FROM timer) AS timer_key, (SELECT run_at FROM timer) AS timer_run_at,
      ${dueJobsJson("embed_job")} AS embed_jobs,
      (SELECT live_count FROM th) AS live_count, (SELECT compact_failed_count FROM th) AS compact_failed_count,
      ${autoCompactThresholdSql(projectId)} AS compact_threshold
    FROM msg`);
  const [row] = parsedRowsOf(AddedRow, result);
  if (!row) throw notFound("Thread not found");
  const timer = row.timer_key ? dueJobsFrom([{ key: row.timer_key, run_at: row.timer_run_at }]) : [];
  ringLater(deps, [...timer, ...dueJobsFromJson(row.embed_jobs)]);
  const threshold = row.compact_threshold === null ? null : Number(row.compact_threshold);
  const compacted =
    crossesThreshold(Number(row.live_count), threshold, row.compact_failed_count) &&
    (await compactAfterWrite(ctx, threadId, inlineCompactionDeadline(ctx.deps)));
  return {
    messageId: row.id,
    threadId: row.thread_id,
    sequenceNumber: Number(row.seq),
    role: row.role,
    createdAt: toIso(row.created_at) as string,
    compacted,
  };
}

const AddedRow = z.object({
  id: z.string(),
  thread_id: z.string(),
  seq: dbInt,
  role: messageRole(),
  created_at: dbTimestampSet,
  timer_key: z.string().nullable(),
  timer_run_at: dbTimestamp,
  embed_jobs: z.unknown(),
  live_count: dbInt,
  compact_failed_count: dbInt.nullable(),
  compact_threshold: dbInt.nullable(),
});

/** An optional object as jsonb text; an empty one (every key stripped) is stored as null. */
function jsonOrNull(value: object | undefined): string | null {
  return value && Object.keys(value).length > 0 ? JSON.stringify(value) : null;
}

/** A `messages` row as raw SQL or `row_to_json` gives it. */
export const MessageRow = z.object({
  id: z.string(),
  thread_id: z.string(),
  seq: dbInt,
  role: messageRole(),
  content: z.string(),
  tokens: z
    .looseObject({ input: z.number().optional(), output: z.number().optional(), total: z.number().optional() })
    .nullable(),
  model: z.string().nullable(),
  latency_ms: dbNumber.nullable(),
  metadata: z.looseObject({ stopReason: z.string().optional(), agentName: z.string().optional() }).nullable(),
  compacted_at: dbTimestamp,
  created_at: dbTimestampSet,
});
type MessageRow = z.output<typeof MessageRow>;

export function messageRecord(m: MessageRow) {
  return {
    messageId: m.id,
    threadId: m.thread_id,
    sequenceNumber: Number(m.seq),
    role: m.role,
    content: m.content,
    tokens: m.tokens ?? null,
    model: m.model,
    latencyMs: m.latency_ms === null ? null : Number(m.latency_ms),
    metadata: m.metadata ?? null,
    compactedAt: toIso(m.compacted_at),
    createdAt: toIso(m.created_at) as string,
  };
}

export interface ListMessagesQuery {
  limit: number;
  before?: number;
  order: "asc" | "desc";
}

/**
 * A page is the `limit` newest messages with sequenceNumber below `before` (all when absent),
 * sorted as `order` asks; `hasMore` says older messages remain, so paging passes the smallest
 * sequenceNumber seen as the next `before`. One statement: thread check, total and page.
 */
export async function listMessages(
  { deps, projectId }: ReadContext,
  { threadId, ...q }: ListMessagesQuery & { threadId: string },
) {
  const result = await deps.db.execute(sql`
    WITH t AS (SELECT id FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}),
    page AS (
      SELECT m.* FROM ${messages} m
      WHERE m.thread_id = (SELECT id FROM t) AND (${q.before ?? null}::int IS NULL OR m.seq < ${q.before ?? null}::int)
      ORDER BY m.seq DESC LIMIT ${q.limit + 1}
    )
    SELECT (SELECT count(*) FROM t)::int AS thread_found,
           (SELECT count(*) FROM ${messages} WHERE thread_id = (SELECT id FROM t))::int AS total,
           coalesce((SELECT json_agg(row_to_json(page) ORDER BY page.seq DESC) FROM page), '[]'::json) AS page`);
  const [row] = parsedRowsOf(
    z.object({ thread_found: dbInt, total: dbInt, page: dbJson(z.array(MessageRow)) }),
    result,
  );
  if (!row || row.thread_found === 0) throw notFound("Thread not found");
  const { page } = row;
  const hasMore = page.length > q.limit;
  const rows = page.slice(0, q.limit);
  if (q.order === "asc") rows.reverse();
  return { messages: rows.map(messageRecord), total: row.total, hasMore };
}

/**
 * The LLM-ready window, in one statement and without a model call: the active compact summary
 * (if any) first, then the newest `messageLimit` un-compacted messages, oldest first. The count
 * comes from the thread row (kept by the statements that change it), so a long thread costs
 * what a short one does. `warning` when un-compacted messages can be left out (prepareWarning).
 */
export async function prepareContext(
  { deps, projectId }: ReadContext,
  { threadId, messageLimit, budget = false }: { threadId: string; messageLimit: number; budget?: boolean },
) {
  // Chat asks whether the project's token budget is spent, in the same statement.
  const budgetColumn = budget ? sql`, ${budgetSpentSql(projectId, deps.clock.now())} AS budget_spent` : sql``;
  const result = await deps.db.execute(sql`
    WITH t AS (SELECT id, dataset, live_count FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}),
    live AS (
      -- Served by messages_live_idx; the thread id is a literal (rows are only used when t, the
      -- tenant check, found the thread) so the planner can see how few rows are live.
      SELECT seq, role, content FROM ${messages}
      WHERE thread_id = ${threadId} AND compacted_at IS NULL AND NOT is_summary
      ORDER BY seq DESC LIMIT ${messageLimit}
    ),
    summary AS (
      SELECT role, content FROM ${messages}
      WHERE thread_id = (SELECT id FROM t) AND is_summary AND compacted_at IS NULL
      ORDER BY seq DESC LIMIT 1
    )
    SELECT t.dataset, t.live_count AS message_count, ${autoCompactThresholdSql(projectId)} AS compact_threshold,
           (SELECT row_to_json(summary) FROM summary) AS summary,
           coalesce((SELECT json_agg(json_build_object('role', role, 'content', content) ORDER BY seq) FROM live), '[]'::json) AS window${budgetColumn}
    FROM t`);
  const [row] = parsedRowsOf(WindowRow, result);
  if (!row) throw notFound("Thread not found");
  const { summary, window } = row;
  const messageCount = row.message_count;
  const threshold = row.compact_threshold;
  return {
    threadId,
    dataset: row.dataset,
    ...(budget ? { budgetSpent: row.budget_spent === true } : {}),
    messages: summary ? [{ role: summary.role, content: summary.content }, ...window] : window,
    messageCount,
    truncated: messageCount > window.length,
    compacted: summary !== null,
    ...prepareWarning(messageLimit, threshold, messageCount, window.length),
  };
}

/**
 * Prepare's `warning`: messageLimit below autoCompactThreshold (the spec's), or, with a limit at or
 * above it, un-compacted messages left out all the same (a threshold lowered or turned on since the
 * thread grew, or an inline compaction that failed: the thread is compacted at a later write).
 */
export function prepareWarning(
  messageLimit: number,
  threshold: number | null,
  messageCount: number,
  inWindow: number,
): { warning?: string } {
  if (threshold === null) return {};
  if (messageLimit < threshold) {
    return {
      warning: `messageLimit ${messageLimit} is below autoCompactThreshold ${threshold}: up to ${threshold - messageLimit} un-compacted messages can be left out of the window`,
    };
  }
  if (messageCount > inWindow) {
    return {
      warning: `${messageCount - inWindow} un-compacted messages are left out of the window: the thread has ${messageCount}, above autoCompactThreshold ${threshold}, and is compacted at a later write (or compact it now)`,
    };
  }
  return {};
}

const WindowMessage = z.object({ role: messageRole(), content: z.string() });
const WindowRow = z.object({
  dataset: z.string(),
  message_count: dbInt,
  compact_threshold: dbInt.nullable(),
  summary: dbJson(WindowMessage.nullable()),
  window: dbJson(z.array(WindowMessage)),
  budget_spent: z.boolean().optional(),
});

/** The thread's messages counted by role, as one JSON object (`{"user": 3, …}`, every role named). */
const BY_ROLE = sql.raw(
  `jsonb_build_object(${MESSAGE_ROLES.map((role) => `'${role}', count(*) FILTER (WHERE role = '${role}')`).join(", ")})`,
);

/**
 * Counts by role, caller-reported token totals, first/last message time, session duration, and
 * compaction: how many compactions ran, how many messages are folded, the active summary's range.
 */
export async function threadStats({ deps, projectId }: ReadContext, { threadId }: { threadId: string }) {
  const result = await deps.db.execute(sql`
    WITH t AS (SELECT id, dataset FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}),
    m AS (SELECT * FROM ${messages} WHERE thread_id = (SELECT id FROM t) AND NOT is_summary)
    SELECT (SELECT dataset FROM t) AS dataset,
           (SELECT count(*) FROM t)::int AS thread_found,
           count(*)::int AS message_count,
           ${BY_ROLE} AS by_role,
           count(*) FILTER (WHERE compacted_at IS NOT NULL)::int AS compacted_count,
           coalesce(sum((tokens ->> 'input')::numeric), 0)::float8 AS input_tokens,
           coalesce(sum((tokens ->> 'output')::numeric), 0)::float8 AS output_tokens,
           coalesce(sum((tokens ->> 'total')::numeric), 0)::float8 AS total_tokens,
           min(created_at) AS first_at,
           max(created_at) AS last_at,
           (SELECT count(*) FROM ${messages} WHERE thread_id = (SELECT id FROM t) AND is_summary)::int AS compactions,
           (SELECT json_build_object('messageId', id, 'fromSequence', summary_from_seq, 'toSequence', summary_to_seq,
                                     'createdAt', created_at)
            FROM ${messages} WHERE thread_id = (SELECT id FROM t) AND is_summary AND compacted_at IS NULL
            ORDER BY seq DESC LIMIT 1) AS active_summary
    FROM m`);
  const [r] = parsedRowsOf(StatsRow, result);
  if (!r || r.thread_found === 0 || r.dataset === null) throw notFound("Thread not found");
  const firstAt = toIso(r.first_at);
  const lastAt = toIso(r.last_at);
  const active = r.active_summary;
  return {
    threadId,
    dataset: r.dataset,
    messageCount: r.message_count,
    byRole: r.by_role,
    compactedCount: r.compacted_count,
    compaction: {
      compactions: r.compactions,
      activeSummary: active ? { ...active, createdAt: toIso(active.createdAt) as string } : null,
    },
    tokens: { input: r.input_tokens, output: r.output_tokens, total: r.total_tokens },
    firstMessageAt: firstAt,
    lastMessageAt: lastAt,
    sessionDurationMs: firstAt && lastAt ? Date.parse(lastAt) - Date.parse(firstAt) : 0,
  };
}

const StatsRow = z.object({
  dataset: z.string().nullable(),
  thread_found: dbInt,
  message_count: dbInt,
  by_role: dbJson(z.object(perRole(() => z.number()))),
  compacted_count: dbInt,
  input_tokens: dbNumber,
  output_tokens: dbNumber,
  total_tokens: dbNumber,
  first_at: dbTimestamp,
  last_at: dbTimestamp,
  compactions: dbInt,
  active_summary: dbJson(
    z
      .object({
        messageId: z.string(),
        fromSequence: z.number(),
        toSequence: z.number(),
        createdAt: z.string(),
      })
      .nullable(),
  ),
});

import { sql } from "drizzle-orm";
import { ZodRealError, z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, parsedRowsOf, toIso } from "../db/rows";
import { messages, threads } from "../db/schema";
import { idleJobSql } from "../episodic/triggers";
import { notFound } from "../errors";
import { indexMessagesCtes } from "../evidence/write";
import { newId } from "../ids";
import { dueJobsFromJson, dueJobsJson, ringLater } from "../jobs/schedule";
import type { MessageRole } from "../roles";
import { annotateSpan } from "../telemetry";
import { autoCompactThresholdSql, compactAfterWrite, crossesThreshold, inlineCompactionDeadline } from "./compaction";
import type { MessageInput } from "./messages";

/** At most this many messages in one batch request (the body is also bounded: MAX_BATCH_BODY_BYTES). */
export const MAX_BATCH_MESSAGES = 1000;

export interface BatchItem extends MessageInput {
  threadId: string;
  /** A historical time (a backfill); the request's time when absent. */
  createdAt?: Date;
}

export interface BatchMessage {
  messageId: string;
  threadId: string;
  sequenceNumber: number;
  role: MessageRole;
  createdAt: string;
}

type Issue = { code: "custom"; path: (string | number)[]; message: string; input?: unknown };

/**
 * The request-level createdAt rules that need no database: not in the future (the service's
 * clock), and non-decreasing within each thread in request order (an item without createdAt
 * counts as now). Issues name `["messages", i, "createdAt"]`.
 */
function createdAtIssues(items: BatchItem[], now: Date): Issue[] {
  const issues: Issue[] = [];
  const last = new Map<string, number>();
  items.forEach((item, i) => {
    const at = item.createdAt?.getTime() ?? now.getTime();
    if (item.createdAt && at > now.getTime()) {
      issues.push({
        code: "custom",
        path: ["messages", i, "createdAt"],
        message: "Must not be in the future",
        input: item.createdAt.toISOString(),
      });
    }
    const previous = last.get(item.threadId);
    if (previous !== undefined && at < previous) {
      issues.push({
        code: "custom",
        path: ["messages", i, "createdAt"],
        message: "Must not be before the previous message of the same thread in this batch",
        input: new Date(at).toISOString(),
      });
    }
    last.set(item.threadId, Math.max(at, previous ?? at));
  });
  return issues;
}

/**
 * Appends many messages, to one thread or several, in ONE statement (so one transaction, one
 * round trip on Neon's HTTP driver): the items travel as one jsonb array; the threads are locked
 * (in id order, so two batches never deadlock); then, only if every thread is in the project and
 * no historical createdAt is before its thread's last message, each thread's counter is bumped
 * once by its item count, the messages inserted with gapless sequence numbers in request order,
 * and each thread's idle timer armed. Otherwise nothing is written. Auto-compaction runs after,
 * at most once per thread, when the batch left the thread's un-compacted count at the threshold
 * or above it (crossesThreshold).
 *
 * An unknown thread (or another project's) is `404 Thread not found`, naming nothing else.
 */
export async function addMessages(ctx: ProjectContext, { messages: items }: { messages: BatchItem[] }) {
  const { deps, projectId } = ctx;
  const nowDate = deps.clock.now();
  const now = nowDate.toISOString();
  const issues = createdAtIssues(items, nowDate);
  if (issues.length > 0) throw new ZodRealError(issues as never);

  const rows = batchRows(items, now);
  annotateSpan({ "gen_ai.memory.record.count": rows.length }); // the create_memory span's, when tracing
  const [row] = parsedRowsOf(BatchResultRow, await deps.db.execute(addMessagesSql(projectId, now, rows)));
  if (!row || row.missing > 0) throw notFound("Thread not found");
  const early = earlyIssues(row.early ?? [], rows);
  if (early.length > 0) throw new ZodRealError(early as never);
  const touched = row.threads ?? [];
  ringLater(deps, [...dueJobsFromJson(row.timers), ...dueJobsFromJson(row.embed_jobs)]);

  const compactedThreadIds: string[] = [];
  const toCompact = threadsToCompact(touched, row.compact_threshold);
  if (toCompact.length > 0) {
    const deadline = inlineCompactionDeadline(deps);
    for (const threadId of toCompact) {
      if (await compactAfterWrite(ctx, threadId, deadline)) compactedThreadIds.push(threadId);
    }
  }
  return { messages: sequenced(placedRows(rows, row.moved ?? []), touched), compactedThreadIds };
}

export type BatchRow = ReturnType<typeof batchRows>[number];

/** The items as the statement's jsonb input: ids drawn, empty objects dropped, createdAt defaulted to `now`. */
export function batchRows(items: BatchItem[], now: string) {
  return items.map((item, i) => ({
    ord: i,
    id: newId("msg"),
    thread_id: item.threadId,
    role: item.role,
    content: item.content,
    tokens: nonEmpty(item.tokens),
    model: item.model,
    latency_ms: item.latencyMs,
    metadata: nonEmpty(item.metadata),
    created_at: item.createdAt?.toISOString() ?? now,
    // A defaulted time is the request's clock, read before the thread is locked: a concurrent
    // append may commit a later one first. Such a time moves up to the thread's last message
    // (never a 400); a client's own createdAt is checked, not moved.
    defaulted: item.createdAt === undefined,
  }));
}

const TouchedThread = z.object({
  id: z.string(),
  last_seq: z.number(),
  live_count: z.number(),
  compact_failed_count: z.number().nullable(),
  n: z.number(),
});
type TouchedThread = z.output<typeof TouchedThread>;

const BatchResultRow = z.object({
  missing: dbInt,
  early: dbJson(z.array(z.object({ ord: z.number(), last_at: z.string() })).nullable()),
  threads: dbJson(z.array(TouchedThread).nullable()),
  moved: dbJson(z.array(z.object({ ord: z.number(), at: z.string() })).nullable()),
  timers: z.unknown(),
  embed_jobs: z.unknown(),
  compact_threshold: dbInt.nullable(),
});

function addMessagesSql(projectId: string, now: string, rows: BatchRow[]) {
  return sql`
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(ord int, id text, thread_id text,
        role text, content text, tokens jsonb, model text, latency_ms real, metadata jsonb, created_at timestamptz,
        defaulted boolean)
    ),
    per AS (SELECT thread_id, count(*)::int AS n FROM input GROUP BY thread_id),
    locked AS (
      -- The row as locked is its newest version (last_message_at); the newest message covers a
      -- summary written by compaction.
      SELECT t.id, greatest(t.last_message_at,
        (SELECT m.created_at FROM ${messages} m WHERE m.thread_id = t.id ORDER BY m.seq DESC LIMIT 1)) AS last_at
      FROM ${threads} t WHERE t.id IN (SELECT thread_id FROM per) AND t.project_id = ${projectId}
      ORDER BY t.id FOR UPDATE
    ),
    placed AS (
      SELECT input.*, CASE WHEN input.defaulted THEN greatest(input.created_at, locked.last_at)
        ELSE input.created_at END AS placed_at
      FROM input JOIN locked ON locked.id = input.thread_id
    ),
    early AS (SELECT ord, last_at FROM placed JOIN locked ON locked.id = placed.thread_id WHERE placed_at < last_at),
    ok AS (
      SELECT (SELECT count(*) FROM locked) = (SELECT count(*) FROM per) AND NOT EXISTS (SELECT 1 FROM early) AS ok
    ),
    th AS (
      UPDATE ${threads} t SET last_seq = t.last_seq + per.n, live_count = t.live_count + per.n,
        last_message_at = (SELECT max(placed_at) FROM placed WHERE placed.thread_id = t.id), updated_at = ${now}::timestamptz
      FROM per, ok
      WHERE ok.ok AND t.id = per.thread_id AND t.project_id = ${projectId}
      RETURNING t.id, t.project_id, t.dataset, t.settings, t.last_seq, t.live_count, t.compact_failed_count, per.n
    ),
    msg AS (
      INSERT INTO ${messages} (id, project_id, thread_id, seq, role, content, tokens, model, latency_ms, metadata, created_at)
      SELECT placed.id, ${projectId}, th.id,
        th.last_seq - th.n + row_number() OVER (PARTITION BY placed.thread_id ORDER BY placed.ord),
        placed.role, placed.content, placed.tokens, placed.model, placed.latency_ms, placed.metadata, placed.placed_at
      FROM placed JOIN th ON th.id = placed.thread_id
      RETURNING id, thread_id, role, content, created_at
    ),
    ${indexMessagesCtes(now)},
    timer AS (${idleJobSql(now)})
    SELECT (SELECT count(*) FROM per)::int - (SELECT count(*) FROM locked)::int AS missing,
      (SELECT json_agg(json_build_object('ord', ord, 'last_at', last_at)) FROM early) AS early,
      (SELECT json_agg(json_build_object('id', id, 'last_seq', last_seq, 'live_count', live_count,
        'compact_failed_count', compact_failed_count, 'n', n)) FROM th) AS threads,
      (SELECT json_agg(json_build_object('ord', ord, 'at', placed_at)) FROM placed WHERE placed_at <> created_at) AS moved,
      ${dueJobsJson("timer")} AS timers, ${dueJobsJson("embed_job")} AS embed_jobs,
      (SELECT count(*) FROM msg)::int AS inserted,
      ${autoCompactThresholdSql(projectId)} AS compact_threshold`;
}

/** Items whose createdAt is before their thread's last message, in request order. */
export function earlyIssues(early: { ord: number; last_at: string }[], rows: Pick<BatchRow, "created_at">[]): Issue[] {
  return [...early]
    .sort((a, b) => a.ord - b.ord)
    .map((e) => ({
      code: "custom" as const,
      path: ["messages", e.ord, "createdAt"],
      message: `Must not be before the thread's last message (${toIso(e.last_at)})`,
      input: rows[e.ord].created_at,
    }));
}

/** The rows with the times the statement stored: a defaulted time it moved up to the thread's last message. */
export function placedRows<R extends Pick<BatchRow, "ord" | "created_at">>(
  rows: R[],
  moved: { ord: number; at: string }[],
): R[] {
  const at = new Map(moved.map((m) => [m.ord, toIso(m.at) as string]));
  return rows.map((r) => (at.has(r.ord) ? { ...r, created_at: at.get(r.ord) as string } : r));
}

/** Sequence numbers: each thread's items, in request order, end at its new last_seq. */
export function sequenced(
  rows: Pick<BatchRow, "id" | "thread_id" | "role" | "created_at">[],
  touched: Pick<TouchedThread, "id" | "last_seq" | "n">[],
): BatchMessage[] {
  const next = new Map(touched.map((t) => [t.id, Number(t.last_seq) - Number(t.n) + 1]));
  return rows.map((r) => {
    const seq = next.get(r.thread_id) as number;
    next.set(r.thread_id, seq + 1);
    return { messageId: r.id, threadId: r.thread_id, sequenceNumber: seq, role: r.role, createdAt: r.created_at };
  });
}

/** The threads, in id order, that the batch left due an inline compaction (crossesThreshold). */
export function threadsToCompact(
  touched: Pick<TouchedThread, "id" | "live_count" | "compact_failed_count">[],
  compactThreshold: number | string | null,
): string[] {
  const threshold = compactThreshold === null ? null : Number(compactThreshold);
  return [...touched]
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .filter((t) => crossesThreshold(t.live_count, threshold, t.compact_failed_count))
    .map((t) => t.id);
}

function nonEmpty<T extends object>(value: T | undefined): T | undefined {
  return value && Object.keys(value).length > 0 ? value : undefined;
}

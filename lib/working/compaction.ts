import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, parsedRowsOf } from "../db/rows";
import { messages, projects, threads } from "../db/schema";
import type { ProjectRef } from "../db/types";
import type { Deps } from "../deps";
import { notFound } from "../errors";
import { newId } from "../ids";
import type { Completion } from "../llm/client";
import { COMPACTION_PROMPT } from "../llm/prompts";
import { fittingPrefix, TRANSCRIPT_BUDGET_CHARS, transcriptLines, withTranscriptBudget } from "../llm/transcript";
import { errorFields } from "../log";
import { projectSetting } from "../settings/sql";
import { usageCollector } from "../usage/collector";
import { carryingUsage, deferUsage, withUsage } from "../usage/sql";
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
export function autoCompactThresholdSql(projectId: ProjectRef): SQL {
  return sql`(SELECT ${projectSetting("working", "autoCompactThreshold", sql`${projects.settings}`, "int")}
    FROM ${projects} WHERE ${projects.id} = ${projectId})`;
}

/**
 * Whether a write that left `liveCount` un-compacted messages compacts inline: at the threshold or
 * above it (a thread already past a threshold just lowered or turned on compacts at its next
 * write); after a failed attempt (`failedCount`, the count then) only once a threshold more
 * messages came, so a provider outage costs a model call every `threshold` messages, not one on
 * every insert.
 */
export function crossesThreshold(liveCount: number, threshold: number | null, failedCount: number | null): boolean {
  return threshold !== null && liveCount >= threshold && (failedCount === null || liveCount >= failedCount + threshold);
}

const FoldRow = z.object({ seq: z.number(), role: z.string(), content: z.string() });

/** What compaction reads in its first statement: the thread's counters, active summary and fold. */
const FoldState = z.object({
  dataset: z.string(),
  compacted_seq: dbInt,
  live_count: dbInt,
  summary_id: z.string().nullable(),
  summary_content: z.string().nullable(),
  summary_from: dbInt.nullable(),
  fold: dbJson(z.array(FoldRow)),
});
export type FoldState = z.output<typeof FoldState>;

/** What one compaction folds and asks the model, decided from the state it read. */
export interface FoldPlan {
  /** The thread's compacted_seq as read: the write lands only if it is unchanged. */
  expected: number;
  fromSeq: number;
  toSeq: number;
  count: number;
  /** The active summary, folded into the new one (and marked compacted with the messages). */
  previousSummaryId: string | null;
  /** The model's user message: the previous summary, if any, then the transcript to fold. */
  prompt: string;
}

const nothingToCompact = (message: string): NothingToCompact => ({ ok: true, compacted: false, message });

/**
 * The fold of a compaction: the messages in one line each, after the previous summary; the new
 * summary covers from the previous summary's start (or the first folded message) to the last.
 * The transcript holds at most `budget` characters beside the previous summary (at least half of
 * it): the first messages that fit, none cut below MIN_MESSAGE_CHARS (a 1 MB message is cut to
 * its head), the rest left to the next compaction. A fold the model refused for its length was
 * sent again by every compaction after it, so the thread never compacted again.
 */
export function planFold(state: FoldState, budget = TRANSCRIPT_BUDGET_CHARS): FoldPlan | NothingToCompact {
  return state.fold.length === 0 ? nothingToFold(state) : foldWithin(state, budget);
}

/** The answer when the thread has nothing to fold (an empty `fold`). */
const nothingToFold = (state: FoldState) =>
  nothingToCompact(
    `Nothing to compact: ${Number(state.live_count)} message(s) not yet compacted, and the newest ${COMPACT_KEEP_RECENT} are always kept`,
  );

/** planFold of a state whose `fold` is not empty. */
function foldWithin(state: FoldState, budget: number): FoldPlan {
  const room = Math.max(budget - (state.summary_content?.length ?? 0), budget / 2);
  const lengths = state.fold.map((m) => m.content.length);
  const fold = state.fold.slice(0, fittingPrefix(lengths, room));
  const transcript = transcriptLines(fold, room).join("\n");
  return {
    expected: Number(state.compacted_seq),
    fromSeq: state.summary_from === null ? Number(fold[0].seq) : Number(state.summary_from),
    toSeq: Number(fold[fold.length - 1].seq),
    count: fold.length,
    previousSummaryId: state.summary_id,
    prompt: state.summary_content
      ? `Earlier summary:\n${state.summary_content}\n\nConversation since:\n${transcript}`
      : `Conversation:\n${transcript}`,
  };
}

/**
 * Auto-compaction after a write crossed `autoCompactThreshold`: a failure (the provider, most
 * likely, or the deadline `signal` ends) never fails the write, whose messages are stored.
 */
export async function compactAfterWrite(ctx: ProjectContext, threadId: string, signal: AbortSignal): Promise<boolean> {
  try {
    return "summaryMessageId" in (await compactThread(ctx, { threadId, signal }));
  } catch (err) {
    ctx.deps.log.warn("auto-compaction failed; the messages are stored", { threadId, ...errorFields(err) });
    await ctx.deps.db
      .execute(
        sql`UPDATE ${threads} SET compact_failed_count = live_count WHERE id = ${threadId} AND project_id = ${ctx.projectId}`,
      )
      .catch((recordErr) => ctx.deps.log.warn("auto-compaction: could not record the failure", errorFields(recordErr)));
    return false;
  }
}

/**
 * The deadline of a write's auto-compaction, all its threads' together (the spec: "up to 30
 * seconds"): a batch that crosses the threshold in several threads waits no longer than one.
 */
export const inlineCompactionDeadline = (deps: Deps) =>
  AbortSignal.timeout(deps.config.providerDeadlines.inlineCompactionMs);

/**
 * Folds the thread's older un-compacted messages (all but the newest COMPACT_KEEP_RECENT, at
 * most COMPACT_MAX_FOLD, and what fits the model's prompt: planFold, withTranscriptBudget) and
 * its active summary into one new summary message: one statement to
 * read, one model call, one statement to write. The write lands only if no other compaction of
 * the thread landed since the read (`compacted_seq` unchanged, checked under the thread's row
 * lock), so two racing compactions never fold the same messages: the loser writes nothing and
 * answers the nothing-to-compact shape. The summary takes the next sequence number, role
 * `system`; the folded rows (and the previous summary) get `compactedAt`. `signal` ends the model
 * call (a deadline), and with it the compaction.
 */
export async function compactThread(
  { deps, projectId }: ProjectContext,
  { threadId, signal }: { threadId: string; signal?: AbortSignal },
): Promise<Compacted | NothingToCompact> {
  const state = await readFold(deps, projectId, threadId);
  if (state.fold.length === 0) return nothingToFold(state);
  const usage = usageCollector();
  const scope = { projectId, dataset: state.dataset };
  let folded: { plan: FoldPlan; completion: Completion };
  try {
    // A smaller budget folds fewer messages (never none: the fold is not empty).
    folded = await withTranscriptBudget(async (budget) => {
      const plan = foldWithin(state, budget);
      const completion = await deps.llm.complete({
        system: COMPACTION_PROMPT,
        messages: [{ role: "user", content: plan.prompt }],
        meter: usage.meter("compaction"),
        signal,
      });
      return { plan, completion };
    });
  } catch (err) {
    // Nothing is written after a failed call: a later statement carries it.
    deferUsage(deps, usage, scope);
    throw err;
  }
  const { plan, completion } = folded;
  let summaryId: Awaited<ReturnType<typeof writeSummary>>;
  try {
    summaryId = await carryingUsage(usage, (carried) =>
      writeSummary(
        deps,
        projectId,
        threadId,
        plan,
        completion,
        withUsage(carried, scope, deps.clock.now().toISOString()),
      ),
    );
  } catch (err) {
    // The write failed with the call in it: a later statement carries it.
    deferUsage(deps, usage, scope);
    throw err;
  }
  if (summaryId === undefined) throw notFound("Thread not found");
  if (!summaryId) return nothingToCompact("Nothing to compact: another compaction of this thread landed first");
  return {
    threadId,
    summaryMessageId: summaryId,
    compactedCount: plan.count,
    fromSequence: plan.fromSeq,
    toSequence: plan.toSeq,
  };
}

/** The thread's compaction state in one statement; 404 for a thread not in the project. */
async function readFold(deps: Deps, projectId: string, threadId: string): Promise<FoldState> {
  const [state] = parsedRowsOf(
    FoldState,
    await deps.db.execute(sql`
      WITH t AS (
        SELECT id, dataset, compacted_seq, live_count FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}),
      summary AS (
        SELECT id, content, summary_from_seq FROM ${messages}
        WHERE thread_id = (SELECT id FROM t) AND seq > (SELECT compacted_seq FROM t) AND is_summary AND compacted_at IS NULL
        ORDER BY seq DESC LIMIT 1),
      fold AS (
        SELECT seq, role, content FROM ${messages}
        WHERE thread_id = (SELECT id FROM t) AND seq > (SELECT compacted_seq FROM t)
          AND compacted_at IS NULL AND NOT is_summary
        ORDER BY seq LIMIT LEAST(GREATEST((SELECT live_count FROM t) - ${COMPACT_KEEP_RECENT}, 0), ${COMPACT_MAX_FOLD}))
      SELECT t.dataset, t.compacted_seq, t.live_count, s.id AS summary_id, s.content AS summary_content,
        s.summary_from_seq AS summary_from,
        coalesce((SELECT json_agg(json_build_object('seq', seq, 'role', role, 'content', content) ORDER BY seq) FROM fold), '[]'::json) AS fold
      FROM t LEFT JOIN summary s ON true`),
  );
  if (!state) throw notFound("Thread not found");
  return state;
}

/**
 * The summary, the folded rows and the thread's counters in one statement, only while the
 * thread's compacted_seq is the one read; the new summary's id, or null when another compaction
 * landed first, or undefined when the thread is gone (deleted, or its dataset erased, during the
 * model call: a 404 as for any request about it, not the loser's "another compaction landed").
 */
async function writeSummary(
  deps: Deps,
  projectId: string,
  threadId: string,
  plan: FoldPlan,
  completion: Completion,
  usageCte: SQL,
): Promise<string | null | undefined> {
  const { expected, fromSeq, toSeq, count } = plan;
  const now = deps.clock.now().toISOString();
  const summaryId = newId("msg");
  const [written] = parsedRowsOf(
    z.object({ summary_id: z.string().nullable(), thread_exists: z.boolean(), webhook_jobs: z.unknown() }),
    await deps.db.execute(sql`
      WITH claim AS (
        UPDATE ${threads}
        SET compacted_seq = ${toSeq}, live_count = live_count - ${count}, last_seq = last_seq + 1,
          summary_count = summary_count + 1, compact_failed_count = NULL,
          updated_at = ${now}::timestamptz
        WHERE id = ${threadId} AND project_id = ${projectId} AND compacted_seq = ${expected}
        RETURNING id, dataset, last_seq)${usageCte},
      folded AS (
        UPDATE ${messages} SET compacted_at = ${now}::timestamptz
        WHERE thread_id = (SELECT id FROM claim) AND compacted_at IS NULL
          AND ((seq > ${expected} AND seq <= ${toSeq} AND NOT is_summary) OR id = ${plan.previousSummaryId})
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
          'summaryMessageId', ${summaryId}::text, 'compactedCount', ${count}::int, 'fromSequence', ${fromSeq}::int,
          'toSequence', ${toSeq}::int) AS data FROM claim`,
        now,
      )}
      SELECT (SELECT id FROM summary) AS summary_id, (SELECT count(*) FROM folded) AS folded,
        EXISTS (SELECT 1 FROM ${threads} WHERE id = ${threadId} AND project_id = ${projectId}) AS thread_exists,
        ${webhookJobsColumn} AS webhook_jobs`),
  );
  ringWebhookJobs(deps, written?.webhook_jobs);
  if (written?.summary_id) return summaryId;
  return written?.thread_exists === false ? undefined : null;
}

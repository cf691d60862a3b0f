import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbNumber, parsedRowsOf } from "../db/rows";
import { episodes } from "../db/schema";
import { vectorParam } from "../db/vectors";
import type { Deps } from "../deps";
import { failureText } from "../errors";
import { EPISODE_SUMMARY_PROMPT, EpisodeSummarySchema } from "../llm/prompts";
import { embedAllOrHeads } from "../llm/refused-inputs";
import { renderTranscript, type TranscriptMessage, withTranscriptBudget } from "../llm/transcript";
import { errorFields } from "../log";
import type { Settings } from "../settings/settings";
import { type UsageCollector, usageCollector } from "../usage/collector";
import { carryingUsage, withUsage } from "../usage/sql";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";
import { reportEpisodeLag } from "./lag";

/** `lost`: the episode is no longer this run's (its job was claimed again, or it was archived): nothing written. */
export type SummaryOutcome = "completed" | "failed" | "lost";

/** An episode whose summary stage a job run has claimed (lib/pipeline/claim.ts), and what it needs. */
export interface SummaryInput {
  id: string;
  project_id: string;
  dataset: string;
  transcript: TranscriptMessage[];
  settings: Settings;
  /** The claim stamp of the job run (see `Job.claimedAt`): every write below requires it. */
  claimedAt: string;
}

/**
 * The summary call's user message: the transcript (head and tail past maxMessages, its texts
 * within `budget` characters, as renderTranscript cuts it). An episode without messages is a
 * failure to record, not a call.
 */
export function summaryInput(transcript: TranscriptMessage[], settings: Settings, budget?: number): string {
  if (transcript.length === 0) throw new Error("The episode has no messages to summarise (the thread was deleted?)");
  return renderTranscript(transcript, settings.episodic.maxMessages, budget);
}

/** A completed episode waits for fact extraction unless semantic memory is off for its project. */
export const semanticStatusAfterSummary = (settings: Settings) => (settings.semantic.enabled ? "pending" : "skipped");

/**
 * Summarise one claimed episode (its summary stage is `processing` under this run's claim stamp):
 * one Structured-Outputs call and one embedding call, then the result, or the failure, written
 * only while the episode is still processing under the same stamp. A run that outlived its job's
 * lease, whose job was claimed again meanwhile, writes nothing: its late answer or late failure
 * is `lost`. The run's provider calls are recorded by the statement that writes the outcome, whichever
 * it is (and whether or not the claim still holds).
 */
export async function summariseEpisode(deps: Deps, episode: SummaryInput): Promise<SummaryOutcome> {
  const { settings, transcript } = episode;
  const usage = usageCollector();
  try {
    const summary = await withTranscriptBudget((budget) =>
      deps.llm.structured({
        name: "episode_summary",
        schema: EpisodeSummarySchema,
        system: EPISODE_SUMMARY_PROMPT,
        user: summaryInput(transcript, settings, budget),
        meter: usage.meter("episode_summary"),
      }),
    );
    // A summary longer than a small embedding model's window is embedded by its head.
    const meter = usage.meter("episode_embedding");
    const [embedding] = await embedAllOrHeads((texts) => deps.llm.embed(texts, meter), [summary.summary]);
    // A failed write gives its calls back, for the failure's statement to record.
    const written = await carryingUsage(usage, (carried) =>
      writeSummary(deps, episode, carried, summary, embedding, semanticStatusAfterSummary(settings)),
    );
    if (!written) return "lost";
    deps.log.info("episode completed", {
      episodeId: episode.id,
      projectId: episode.project_id,
      messages: transcript.length,
    });
    reportEpisodeLag(written.lagSeconds);
    return "completed";
  } catch (err) {
    if (!(await markFailed(deps, episode, usage, failureText(err)))) return "lost";
    deps.log.warn("episode failed", { episodeId: episode.id, projectId: episode.project_id, ...errorFields(err) });
    return "failed";
  }
}

/** A write that raised webhook events: the row it wrote (none when the claim was lost) and their jobs. */
const WrittenWithEvents = z.object({ id: z.string(), webhook_jobs: z.unknown() });
const SummaryWritten = WrittenWithEvents.extend({ lag: dbNumber.nullable() });

/** The guard of every write: still processing under this run's claim stamp. */
const stillClaimed = (episode: SummaryInput) =>
  sql`id = ${episode.id} AND status = 'processing' AND claimed_at = ${episode.claimedAt}::timestamptz`;

/** Whom the run's provider calls are recorded against. */
const usageScope = (episode: SummaryInput) => ({ projectId: episode.project_id, dataset: episode.dataset });

/**
 * The summary and its embedding, and the episode.completed event; false if the claim was lost,
 * else the episode's lag from its end (for the metrics, read by the same statement).
 */
async function writeSummary(
  deps: Deps,
  episode: SummaryInput,
  usage: UsageCollector,
  summary: { summary: string; keyLearnings: string[] },
  embedding: number[],
  semanticStatus: string,
): Promise<false | { lagSeconds: number | null }> {
  const done = deps.clock.now().toISOString();
  const [written] = parsedRowsOf(
    SummaryWritten,
    await deps.db.execute(sql`
      WITH u AS (
        UPDATE ${episodes} SET status = 'completed', summary = ${summary.summary},
          key_learnings = ${JSON.stringify(summary.keyLearnings)}::jsonb,
          embedding = ${vectorParam(embedding)},
          semantic_status = ${semanticStatus},
          processing_completed_at = ${done}::timestamptz, updated_at = ${done}::timestamptz
        WHERE ${stillClaimed(episode)}
        RETURNING id, project_id, thread_id, dataset, summary, ended_at, processing_completed_at, from_seq, to_seq, created_at
      ),
      -- A repeated end's episode of the whole thread supersedes the thread's older episodes it
      -- covers (the spec's archived): left live, recall and the episode list held the same
      -- conversation twice. Only once it is summarised, so a re-cut that fails loses nothing.
      superseded AS (
        UPDATE ${episodes} o SET status = 'archived', updated_at = ${done}::timestamptz
        FROM u
        WHERE o.thread_id = u.thread_id AND o.id <> u.id AND o.status NOT IN ('archived', 'deleted')
          AND o.from_seq >= u.from_seq AND o.to_seq <= u.to_seq
          -- A smaller range it covers; of two equal ranges (two repeats), the older.
          AND (o.to_seq - o.from_seq < u.to_seq - u.from_seq OR (o.created_at, o.id) < (u.created_at, u.id))
        RETURNING o.id
      )${withUsage(usage, usageScope(episode), done)}, ${webhookEventCtes("episode.completed", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset, 'summary', summary) AS data FROM u`, done)}
      SELECT id, ${webhookJobsColumn} AS webhook_jobs,
        extract(epoch FROM processing_completed_at - ended_at) AS lag FROM u`),
  );
  if (!written) return false;
  ringWebhookJobs(deps, written.webhook_jobs);
  return { lagSeconds: written.lag };
}

/**
 * The failure and the episode.failed event, only while the claim is still this run's: a lost
 * claim must not mark the new owner's run failed. False if it was lost.
 */
async function markFailed(deps: Deps, episode: SummaryInput, usage: UsageCollector, message: string): Promise<boolean> {
  const failedAt = deps.clock.now().toISOString();
  const [marked] = parsedRowsOf(
    WrittenWithEvents,
    await deps.db.execute(sql`
      WITH u AS (
        UPDATE ${episodes} SET status = 'failed', error = ${message},
          processing_completed_at = ${failedAt}::timestamptz, updated_at = ${failedAt}::timestamptz
        WHERE ${stillClaimed(episode)}
        RETURNING id, project_id, thread_id, dataset, error, retry_count
      )${withUsage(usage, usageScope(episode), failedAt)}, ${webhookEventCtes("episode.failed", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset, 'error', error, 'retryCount', retry_count) AS data FROM u`, failedAt)}
      SELECT id, ${webhookJobsColumn} AS webhook_jobs FROM u`),
  );
  if (!marked) return false;
  ringWebhookJobs(deps, marked.webhook_jobs);
  return true;
}

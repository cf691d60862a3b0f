import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import { dbJson, parsedRowsOf } from "../db/rows";
import { episodes, messages, projects, threads } from "../db/schema";
import { vectorParam } from "../db/vectors";
import type { Deps } from "../deps";
import { failureText } from "../errors";
import { LEASE_MS } from "../jobs/store";
import { EPISODE_SUMMARY_PROMPT, EpisodeSummarySchema } from "../llm/prompts";
import { errorFields } from "../log";
import { resolveProjectSettings, resolveThreadSettings, type Settings } from "../settings/settings";
import { budgetSpentSql } from "../usage/budget";
import { type UsageCollector, usageCollector } from "../usage/collector";
import { type UsageScope, withUsage } from "../usage/sql";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";
import { reportEpisodeLag } from "./lag";
import { renderTranscript, type TranscriptMessage } from "./transcript";

/**
 * `skipped`: nothing to do (not pending, or no longer ours when writing). `busy`: the episode is in
 * processing under another attempt that started less than a lease ago; its job should run again
 * once that attempt's lease has run out (its worker died). `paused`: pending, and not started
 * because the project's monthly token budget is spent (lib/usage/budget.ts).
 */
export type EpisodeOutcome = "completed" | "failed" | "skipped" | "busy" | "paused";

/** A claimed episode and the settings it runs with (the summary's claim, and fact extraction's). */
export const ClaimedEpisodeRow = z.object({
  id: z.string(),
  project_id: z.string(),
  dataset: z.string(),
  project_settings: dbJson(z.record(z.string(), z.unknown()).nullable()),
  thread_settings: dbJson(z.record(z.string(), z.unknown()).nullable()),
});

/** An episode claimed for summarising, with what the summary needs. */
const ClaimedEpisode = ClaimedEpisodeRow.extend({
  transcript: dbJson(z.array(z.object({ seq: z.number(), role: z.string(), content: z.string() })).nullable()),
});
type ClaimedEpisode = z.output<typeof ClaimedEpisode>;

/**
 * The summary call's user message: the transcript (head and tail past maxMessages, as
 * renderTranscript cuts it). An episode without messages is a failure to record, not a call.
 */
export function summaryInput(transcript: TranscriptMessage[], settings: Settings): string {
  if (transcript.length === 0) throw new Error("The episode has no messages to summarise (the thread was deleted?)");
  return renderTranscript(transcript, settings.episodic.maxMessages);
}

/** A completed episode waits for fact extraction unless semantic memory is off for its project. */
export const semanticStatusAfterSummary = (settings: Settings) => (settings.semantic.enabled ? "pending" : "skipped");

/**
 * Summarise one episode: claim it (pending → processing) in one statement that also returns its
 * transcript and settings, make one Structured-Outputs call and one embedding call, then write
 * the result only while the episode is still ours (processing). Safe to run twice: a second run
 * finds the episode no longer pending and does nothing. An episode in processing whose lease
 * (`locked_until`, renewed by the job's heartbeat) ran out, or was released by a restart, belongs
 * to a worker that died: it is taken over, and every write requires the claim's own stamp (`processing_started_at`), so the late answer or
 * late failure of the attempt that was taken over writes nothing.
 */
export async function processEpisode(deps: Deps, episodeId: string): Promise<EpisodeOutcome> {
  const claimedAt = deps.clock.now().toISOString();
  const episode = await claimEpisode(deps, episodeId, claimedAt);
  if (!episode) return unclaimedOutcome(deps, episodeId);

  const settings = resolveThreadSettings(
    resolveProjectSettings(episode.project_settings),
    episode.thread_settings ?? undefined,
  );
  const transcript: TranscriptMessage[] = episode.transcript ?? [];
  // The calls are recorded by the statement that writes the outcome, whichever it is.
  const usage = usageCollector(deps.onUsage);
  const claim = { episodeId, claimedAt, usage, scope: { projectId: episode.project_id, dataset: episode.dataset } };
  try {
    const summary = await deps.llm.structured({
      name: "episode_summary",
      schema: EpisodeSummarySchema,
      system: EPISODE_SUMMARY_PROMPT,
      user: summaryInput(transcript, settings),
      meter: usage.meter("episode_summary"),
    });
    const [embedding] = await deps.llm.embed([summary.summary], usage.meter("episode_embedding"));
    // Taken over meanwhile (this attempt outlived its lease): the new owner writes, not us.
    if (!(await writeSummary(deps, claim, summary, embedding, semanticStatusAfterSummary(settings)))) return "skipped";
    deps.log.info("episode completed", { episodeId, projectId: episode.project_id, messages: transcript.length });
    await reportEpisodeLag(deps, episodeId);
    return "completed";
  } catch (err) {
    if (!(await markFailed(deps, claim, failureText(err)))) return "skipped";
    deps.log.warn("episode failed", { episodeId, projectId: episode.project_id, ...errorFields(err) });
    return "failed";
  }
}

/** pending → processing (or a processing one whose lease ran out), with transcript and settings. */
async function claimEpisode(deps: Deps, episodeId: string, now: string): Promise<ClaimedEpisode | undefined> {
  const leaseUntil = new Date(Date.parse(now) + LEASE_MS).toISOString();
  const [claimed] = parsedRowsOf(
    ClaimedEpisode,
    await deps.db.execute(sql`
      WITH e AS (
        UPDATE ${episodes} SET status = 'processing', processing_started_at = ${now}::timestamptz,
          processing_completed_at = NULL, error = NULL, locked_until = ${leaseUntil}::timestamptz, updated_at = ${now}::timestamptz
        WHERE id = ${episodeId}
          AND ((status = 'pending' AND NOT ${budgetSpentSql(sql`${episodes}.project_id`, new Date(now))})
               OR (status = 'processing' AND (locked_until IS NULL OR locked_until < ${now}::timestamptz)))
        RETURNING id, project_id, thread_id, dataset, from_seq, to_seq
      )
      SELECT e.id, e.project_id, e.dataset,
        (SELECT settings FROM ${projects} WHERE id = e.project_id) AS project_settings,
        (SELECT settings FROM ${threads} WHERE id = e.thread_id) AS thread_settings,
        (SELECT json_agg(json_build_object('seq', m.seq, 'role', m.role, 'content', m.content) ORDER BY m.seq)
           FROM ${messages} m
          WHERE m.thread_id = e.thread_id AND m.seq BETWEEN e.from_seq AND e.to_seq AND NOT m.is_summary) AS transcript
      FROM e`),
  );
  return claimed;
}

/** Not claimable: `busy` while another attempt holds it, `paused` when still pending (the budget), else `skipped`. */
async function unclaimedOutcome(deps: Deps, episodeId: string): Promise<EpisodeOutcome> {
  const [current] = await deps.db.select({ status: episodes.status }).from(episodes).where(eq(episodes.id, episodeId));
  return current?.status === "processing" ? "busy" : current?.status === "pending" ? "paused" : "skipped";
}

/** A write that raised webhook events: the row it wrote (none when the claim was lost) and their jobs. */
const WrittenWithEvents = z.object({ id: z.string(), webhook_jobs: z.unknown() });

/**
 * This attempt's claim: every write requires the episode to be still processing under it. The
 * write records the attempt's provider calls (`usage`) whether or not the claim still holds.
 */
interface Claim {
  episodeId: string;
  claimedAt: string;
  usage: UsageCollector;
  scope: UsageScope;
}

/** The summary and its embedding, and the episode.completed event; false if the claim was lost. */
async function writeSummary(
  deps: Deps,
  claim: Claim,
  summary: { summary: string; keyLearnings: string[] },
  embedding: number[],
  semanticStatus: string,
): Promise<boolean> {
  const done = deps.clock.now().toISOString();
  const [written] = parsedRowsOf(
    WrittenWithEvents,
    await deps.db.execute(sql`
      WITH u AS (
        UPDATE ${episodes} SET status = 'completed', summary = ${summary.summary},
          key_learnings = ${JSON.stringify(summary.keyLearnings)}::jsonb,
          embedding = ${vectorParam(embedding)},
          semantic_status = ${semanticStatus},
          processing_completed_at = ${done}::timestamptz, updated_at = ${done}::timestamptz
        WHERE id = ${claim.episodeId} AND status = 'processing' AND processing_started_at = ${claim.claimedAt}::timestamptz
        RETURNING id, project_id, thread_id, dataset, summary
      )${withUsage(claim.usage, claim.scope, done)}, ${webhookEventCtes("episode.completed", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset, 'summary', summary) AS data FROM u`, done)}
      SELECT id, ${webhookJobsColumn} AS webhook_jobs FROM u`),
  );
  if (!written) return false;
  ringWebhookJobs(deps, written.webhook_jobs);
  return true;
}

/**
 * The failure and the episode.failed event, only while the claim is still ours: a lost claim
 * must not mark the new owner's run failed. False if it was lost.
 */
async function markFailed(deps: Deps, claim: Claim, message: string): Promise<boolean> {
  const failedAt = deps.clock.now().toISOString();
  const [marked] = parsedRowsOf(
    WrittenWithEvents,
    await deps.db.execute(sql`
      WITH u AS (
        UPDATE ${episodes} SET status = 'failed', error = ${message},
          processing_completed_at = ${failedAt}::timestamptz, updated_at = ${failedAt}::timestamptz
        WHERE id = ${claim.episodeId} AND status = 'processing' AND processing_started_at = ${claim.claimedAt}::timestamptz
        RETURNING id, project_id, thread_id, dataset, error, retry_count
      )${withUsage(claim.usage, claim.scope, failedAt)}, ${webhookEventCtes("episode.failed", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset, 'error', error, 'retryCount', retry_count) AS data FROM u`, failedAt)}
      SELECT id, ${webhookJobsColumn} AS webhook_jobs FROM u`),
  );
  if (!marked) return false;
  ringWebhookJobs(deps, marked.webhook_jobs);
  return true;
}

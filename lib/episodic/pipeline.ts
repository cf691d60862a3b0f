import { sql } from "drizzle-orm";
import { jsonOf, rowsOf } from "../db/rows";
import { episodes, messages, projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import { failureText } from "../errors";
import { LEASE_MS } from "../jobs/store";
import { EPISODE_SUMMARY_PROMPT, EpisodeSummarySchema } from "../llm/prompts";
import { errorFields } from "../log";
import { resolveProjectSettings, resolveThreadSettings, type ThreadSettings } from "../settings/settings";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";
import { renderTranscript, type TranscriptMessage } from "./transcript";

/**
 * `skipped`: nothing to do (not pending, or no longer ours when writing). `busy`: the episode is in
 * processing under another attempt that started less than a lease ago; its job should run again
 * once that attempt's lease has run out (its worker died).
 */
export type EpisodeOutcome = "completed" | "failed" | "skipped" | "busy";

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
  const now = deps.clock.now().toISOString();
  const leaseUntil = new Date(Date.parse(now) + LEASE_MS).toISOString();
  const claimed = rowsOf<{
    id: string;
    project_id: string;
    dataset: string;
    project_settings: Record<string, unknown> | null;
    thread_settings: ThreadSettings | null;
    transcript: TranscriptMessage[] | string | null;
  }>(
    await deps.db.execute(sql`
      WITH e AS (
        UPDATE ${episodes} SET status = 'processing', processing_started_at = ${now}::timestamptz,
          processing_completed_at = NULL, error = NULL, locked_until = ${leaseUntil}::timestamptz, updated_at = ${now}::timestamptz
        WHERE id = ${episodeId}
          AND (status = 'pending'
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
  const episode = claimed[0];
  if (!episode) {
    const [current] = rowsOf<{ status: string }>(
      await deps.db.execute(sql`SELECT status FROM ${episodes} WHERE id = ${episodeId}`),
    );
    return current?.status === "processing" ? "busy" : "skipped";
  }

  const settings = resolveThreadSettings(
    resolveProjectSettings(episode.project_settings),
    episode.thread_settings ?? undefined,
  );
  const transcript = jsonOf<TranscriptMessage[]>(episode.transcript ?? []);

  try {
    if (transcript.length === 0) throw new Error("The episode has no messages to summarise (the thread was deleted?)");
    const text = renderTranscript(transcript, settings.episodic.maxMessages);
    const summary = await deps.llm.structured({
      name: "episode_summary",
      schema: EpisodeSummarySchema,
      system: EPISODE_SUMMARY_PROMPT,
      user: text,
    });
    const [embedding] = await deps.llm.embed([summary.summary]);
    const done = deps.clock.now().toISOString();
    const written = rowsOf<{ id: string; webhook_jobs: unknown }>(
      await deps.db.execute(sql`
        WITH u AS (
          UPDATE ${episodes} SET status = 'completed', summary = ${summary.summary},
            key_learnings = ${JSON.stringify(summary.keyLearnings)}::jsonb,
            embedding = ${`[${embedding.join(",")}]`}::vector,
            semantic_status = ${settings.semantic.enabled ? "pending" : "skipped"},
            processing_completed_at = ${done}::timestamptz, updated_at = ${done}::timestamptz
          WHERE id = ${episodeId} AND status = 'processing' AND processing_started_at = ${now}::timestamptz
          RETURNING id, project_id, thread_id, dataset, summary
        ), ${webhookEventCtes("episode.completed", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset, 'summary', summary) AS data FROM u`, done)}
        SELECT id, ${webhookJobsColumn} AS webhook_jobs FROM u`),
    );
    // Taken over meanwhile (this attempt outlived its lease): the new owner writes, not us.
    if (written.length === 0) return "skipped";
    ringWebhookJobs(deps, written[0].webhook_jobs);
    deps.log.info("episode completed", { episodeId, projectId: episode.project_id, messages: transcript.length });
    return "completed";
  } catch (err) {
    const message = failureText(err);
    const failedAt = deps.clock.now().toISOString();
    // Only while the claim is still ours: a lost claim must not mark the new owner's run failed.
    const marked = rowsOf<{ id: string; webhook_jobs: unknown }>(
      await deps.db.execute(sql`
        WITH u AS (
          UPDATE ${episodes} SET status = 'failed', error = ${message},
            processing_completed_at = ${failedAt}::timestamptz, updated_at = ${failedAt}::timestamptz
          WHERE id = ${episodeId} AND status = 'processing' AND processing_started_at = ${now}::timestamptz
          RETURNING id, project_id, thread_id, dataset, error, retry_count
        ), ${webhookEventCtes("episode.failed", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset, 'error', error, 'retryCount', retry_count) AS data FROM u`, failedAt)}
        SELECT id, ${webhookJobsColumn} AS webhook_jobs FROM u`),
    );
    if (marked.length === 0) return "skipped";
    ringWebhookJobs(deps, marked[0].webhook_jobs);
    deps.log.warn("episode failed", { episodeId, projectId: episode.project_id, ...errorFields(err) });
    return "failed";
  }
}

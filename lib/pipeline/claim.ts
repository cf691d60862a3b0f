import { eq, type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbJson, parsedRowsOf } from "../db/rows";
import { episodes, messageSearch, messages, projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import { storedUserNamesSql } from "../semantic/extract";
import { budgetSpentSql } from "../usage/budget";

/** An episode's stages after its messages are embedded: the summary, then fact extraction. */
export type Stage = "summary" | "facts";

/** What the claim statement returns: the stage claimed and what its work reads. */
const ClaimedRow = z.object({
  id: z.string(),
  project_id: z.string(),
  thread_id: z.string(),
  dataset: z.string(),
  stage: z.enum(["summary", "facts"]),
  project_settings: dbJson(z.record(z.string(), z.unknown()).nullable()),
  thread_settings: dbJson(z.record(z.string(), z.unknown()).nullable()),
  transcript: dbJson(
    z.array(z.object({ seq: z.number(), role: z.string(), content: z.string(), created_at: z.string() })).nullable(),
  ),
  /** Fact extraction only: the names the user goes by in the dataset (lib/semantic/subject.ts). */
  user_names: dbJson(z.array(z.string()).nullable()),
});
export type ClaimedStage = z.output<typeof ClaimedRow>;

/**
 * A message extraction may read: not a user message that forgetting a fact took out of the
 * conversation index (lib/evidence/write.ts; every user message has an index row from its
 * insert on). Otherwise an `end` repeated over the same messages, which cuts another episode of
 * the whole thread, extracted the forgotten fact again from the very words it was forgotten with.
 */
const notForgottenSql = (m: SQL) =>
  sql`(${m}.role <> 'user' OR EXISTS (SELECT 1 FROM ${messageSearch} s WHERE s.message_id = ${m}.id))`;

/**
 * Claims the episode's next pending stage for a run of its job, in one statement that also reads
 * what the stage needs (its settings, its transcript, and for extraction the user's names): the
 * summary while it is not written (pending, or processing: left by an earlier run of the job,
 * which cannot be running any more, since this run holds the job's lease), else fact extraction
 * while it is pending or processing. The claim writes the run's stamp (`claimedAt`, when the job
 * was claimed) on the episode; every write of the stage requires it, so an earlier run that
 * outlived its lease writes nothing once this one has claimed. A pending summary is not started
 * while the project's monthly token budget is spent (lib/usage/budget.ts; see pausedByBudget);
 * one already in processing, and extraction, are. Nothing pending: undefined.
 */
export async function claimNextStage(
  deps: Deps,
  episodeId: string,
  claimedAt: string,
): Promise<ClaimedStage | undefined> {
  const now = deps.clock.now().toISOString();
  // `status` on the right of SET and in WHERE is the row's before the claim; in RETURNING, after it.
  const facts = sql`status = 'completed'`;
  const [claimed] = parsedRowsOf(
    ClaimedRow,
    await deps.db.execute(sql`
      WITH e AS (
        UPDATE ${episodes} SET
          status = CASE WHEN ${facts} THEN status ELSE 'processing' END,
          processing_started_at = CASE WHEN ${facts} THEN processing_started_at ELSE ${now}::timestamptz END,
          processing_completed_at = CASE WHEN ${facts} THEN processing_completed_at END,
          error = CASE WHEN ${facts} THEN error END,
          semantic_status = CASE WHEN ${facts} THEN 'processing' ELSE semantic_status END,
          semantic_error = CASE WHEN ${facts} THEN NULL ELSE semantic_error END,
          claimed_at = ${claimedAt}::timestamptz, updated_at = ${now}::timestamptz
        WHERE id = ${episodeId}
          AND ((status = 'pending' AND NOT ${budgetSpentSql(sql`${episodes}.project_id`, deps.clock.now())})
               OR status = 'processing'
               OR (status = 'completed' AND semantic_status IN ('pending', 'processing')))
        RETURNING id, project_id, thread_id, dataset, from_seq, to_seq,
          CASE WHEN status = 'completed' THEN 'facts' ELSE 'summary' END AS stage
      )
      SELECT e.id, e.project_id, e.thread_id, e.dataset, e.stage, p.settings AS project_settings,
        (SELECT th.settings FROM ${threads} th WHERE th.id = e.thread_id) AS thread_settings,
        (SELECT json_agg(json_build_object('seq', m.seq, 'role', m.role, 'content', m.content, 'created_at', m.created_at) ORDER BY m.seq)
           FROM ${messages} m
          WHERE m.thread_id = e.thread_id AND m.seq BETWEEN e.from_seq AND e.to_seq AND NOT m.is_summary
            AND (e.stage = 'summary' OR ${notForgottenSql(sql`m`)})) AS transcript,
        CASE WHEN e.stage = 'facts' THEN ${storedUserNamesSql(sql`e`)} END AS user_names
      FROM e JOIN ${projects} p ON p.id = e.project_id`),
  );
  return claimed;
}

/**
 * After a claim that found nothing: whether the episode is still pending, which (the run holding
 * its job's lease) only the project's spent token budget leaves it: its job looks again later.
 */
export async function pausedByBudget(deps: Deps, episodeId: string): Promise<boolean> {
  const [current] = await deps.db.select({ status: episodes.status }).from(episodes).where(eq(episodes.id, episodeId));
  return current?.status === "pending";
}

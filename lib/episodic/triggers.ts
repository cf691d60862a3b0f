import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbTimestamp, dbTimestampSet, parsedRowsOf, rowsOf, toDate } from "../db/rows";
import { episodes, messages, projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import { badRequest, notFound } from "../errors";
import { newId } from "../ids";
import type { DueJob } from "../jobs/doorbell";
import { jobKeySql } from "../jobs/kinds";
import { dueJobsFrom, jobExistsSql, jobWaitingSql, ringLater, scheduleJobsSql } from "../jobs/schedule";
import { episodicSetting } from "../settings/sql";

/** A new thread pulls a waiting sibling's episode forward to at most this long from now. */
export const PULL_FORWARD_MS = 5 * 60 * 1000;

export type EpisodeTrigger = "end" | "idle" | "sibling";

const threadSetting = (key: Parameters<typeof episodicSetting>[0], cast: "bigint" | "int" | "boolean") =>
  episodicSetting(key, sql`th.settings`, sql`p.settings`, cast);

/**
 * Cuts an episode from a thread in one statement: locks the thread, takes the messages after the
 * last one any live episode of the thread covers (whatever its status), inserts the episode and
 * its job, and moves the thread's `episode_seq`. The row lock makes concurrent triggers take
 * disjoint ranges, so a thread's episodes never overlap, with one exception the spec asks for: an
 * `end` repeated without new messages takes the whole thread again (see `cutRangeCtes`). Nothing is
 * cut when episodic memory is disabled or there is nothing to cut.
 */
export async function cutEpisode(
  deps: Deps,
  projectId: string,
  threadId: string,
  trigger: EpisodeTrigger,
): Promise<EpisodeCut> {
  const now = deps.clock.now().toISOString();
  const episodeId = newId("epi");
  const [row] = parsedRowsOf(
    CutRow,
    await deps.db.execute(cutEpisodeSql({ projectId, threadId, trigger, episodeId, now })),
  );
  return episodeCut(row, trigger, now);
}

export interface EpisodeCut {
  found: boolean;
  dataset: string | null;
  episodeId: string | null;
  job: DueJob | null;
  endedAt: string | null;
}

const CutRow = z.object({
  dataset: z.string().nullable(),
  found: dbInt,
  episode_id: z.string().nullable(),
  job_key: z.string().nullable(),
  job_run_at: dbTimestamp,
});
export type CutRow = z.output<typeof CutRow>;

/** The cut statement's row as the caller's result (no row: the thread was not found). */
export function episodeCut(row: CutRow | undefined, trigger: EpisodeTrigger, now: string): EpisodeCut {
  return {
    found: (row?.found ?? 0) > 0,
    dataset: row?.dataset ?? null,
    episodeId: row?.episode_id ?? null,
    job: row?.job_key ? { key: row.job_key, runAt: toDate(row.job_run_at) as Date } : null,
    endedAt: trigger === "end" ? now : null,
  };
}

/**
 * The range a cut takes, as CTEs over the locked thread `th`: `covered`, the last message the
 * previous cut took (`episode_seq`, or a live episode's end where that is later), then `cut`. An
 * archived episode's messages stay covered. New messages (after `covered`): those. None new: nothing, except for an `end` that repeats one (the spec's repeat
 * table: another episode), which takes the whole thread again. An `end` repeats one when the
 * thread's latest cut was an end, or when an end was recorded after it (`ended_at`, an earlier end
 * that found nothing new; one stamped in the same millisecond as the cut counts as before it, so a
 * tie never makes an overlap). So the first `end` after an idle (or sibling) cut took the thread's
 * last messages finds nothing new and cuts nothing.
 *
 * The latest cut is read from the thread's row (`last_cut_trigger`, `last_cut_at`), never from its
 * episodes: a cut that waited for the row's lock reads the row as the cut before it left it, but
 * its snapshot predates that cut's episode (READ COMMITTED on a server), so on a server an end that
 * waited behind an idle cut read the cut before as the latest and took the whole thread again.
 *
 * For the same reason the range ends at the last message the statement can see (`seen`), not at
 * the row's `last_seq`: a cut that waited behind a message's insert reads the row's new
 * `last_seq`, but not the message, which its snapshot predates. Taking `last_seq` covered messages
 * no episode held (and an empty cut covered them all). Messages numbered in the same transaction
 * commit with their number, so what the snapshot sees is a prefix of the thread.
 */
function cutRangeCtes(trigger: EpisodeTrigger): SQL {
  const repeatedEnd =
    trigger === "end"
      ? sql`(th.last_cut_trigger IS NULL OR th.last_cut_trigger = 'end' OR th.ended_at > th.last_cut_at)`
      : sql`FALSE`;
  return sql`
    -- The thread's last message by its index, backwards (one entry; a max() over a join with th
    -- read every message of the thread, under the row's lock).
    seen AS (
      SELECT coalesce(
        (SELECT m.seq FROM ${messages} m WHERE m.thread_id = (SELECT id FROM th) ORDER BY m.seq DESC LIMIT 1), 0
      ) AS last_seq
    ),
    covered AS (
      SELECT GREATEST(th.episode_seq, coalesce(max(e.to_seq), 0)) AS to_seq
      FROM th LEFT JOIN ${episodes} e ON e.thread_id = th.id AND e.status NOT IN ('archived', 'deleted')
      GROUP BY th.episode_seq
    ),
    cut AS (
      SELECT th.id, th.project_id, th.dataset, seen.last_seq AS to_seq,
        CASE WHEN seen.last_seq > covered.to_seq THEN covered.to_seq + 1 ELSE 1 END AS from_seq
      FROM th JOIN ${projects} p ON p.id = th.project_id, covered, seen
      WHERE seen.last_seq > 0 AND ${threadSetting("enabled", "boolean")}
        AND (seen.last_seq > covered.to_seq OR ${repeatedEnd})
    )`;
}

/** The cut statement (`cutEpisode`); exported for the suite that runs two at once on a server. */
export function cutEpisodeSql(input: {
  projectId: string;
  threadId: string;
  trigger: EpisodeTrigger;
  episodeId: string;
  now: string;
}) {
  const { projectId, threadId, trigger, episodeId, now } = input;
  return sql`
    WITH th AS (
      SELECT id, project_id, dataset, settings, last_seq, episode_seq, ended_at, last_cut_trigger, last_cut_at
      FROM ${threads}
      WHERE id = ${threadId} AND project_id = ${projectId} FOR UPDATE
    ),
    ${cutRangeCtes(trigger)},
    span AS (
      SELECT count(*)::int AS n, min(m.created_at) AS started_at, max(m.created_at) AS ended_at
      FROM ${messages} m JOIN cut ON m.thread_id = cut.id AND m.seq BETWEEN cut.from_seq AND cut.to_seq
      WHERE NOT m.is_summary
    ),
    moved AS (
      -- Moved only by a cut: an end while episodes are off cuts nothing, and its messages must
      -- still be cut once they are on again.
      UPDATE ${threads} t SET updated_at = ${now}::timestamptz,
        episode_seq = CASE WHEN EXISTS (SELECT 1 FROM cut) THEN GREATEST(th.episode_seq, seen.last_seq) ELSE th.episode_seq END,
        last_cut_trigger = CASE WHEN span.n > 0 THEN ${trigger} ELSE th.last_cut_trigger END,
        last_cut_at = CASE WHEN span.n > 0 THEN ${now}::timestamptz ELSE th.last_cut_at END
        ${trigger === "end" ? sql`, ended_at = ${now}::timestamptz` : sql``}
      FROM th, span, seen WHERE t.id = th.id
      RETURNING t.id
    ),
    ep AS (
      INSERT INTO ${episodes} (id, project_id, thread_id, dataset, status, from_seq, to_seq, message_count,
        started_at, ended_at, metadata, created_at, updated_at)
      SELECT ${episodeId}, cut.project_id, cut.id, cut.dataset, 'pending', cut.from_seq, cut.to_seq, span.n,
        span.started_at, span.ended_at, ${JSON.stringify({ trigger })}::jsonb, ${now}::timestamptz, ${now}::timestamptz
      FROM cut, span WHERE span.n > 0
      RETURNING id, project_id, dataset
    ),
    job AS (${episodeJobSql(sql`FROM ep`, sql`ep`, now)})
    SELECT (SELECT dataset FROM th) AS dataset, (SELECT count(*) FROM moved)::int AS found,
      (SELECT id FROM ep) AS episode_id, (SELECT key FROM job) AS job_key, (SELECT run_at FROM job) AS job_run_at`;
}

/** `POST /v1/threads/:id/end`: records the end and cuts an episode (processing is asynchronous). */
export async function endThread({ deps, projectId }: ProjectContext, { threadId }: { threadId: string }) {
  const cut = await cutEpisode(deps, projectId, threadId, "end");
  if (!cut.found) throw notFound("Thread not found");
  ringLater(deps, cut.job ? [cut.job] : []);
  return { threadId, dataset: cut.dataset as string, endedAt: cut.endedAt as string, episodeId: cut.episodeId };
}

/** The processing job of each episode of `from` (aliased `row`), due now. */
function episodeJobSql(from: SQL, row: SQL, now: string): SQL {
  // A new episode has no job yet; a requeued one may still have the job of a worker that died.
  return scheduleJobsSql({ kind: "episode", row, runAt: sql`${now}::timestamptz`, from, now, mode: "reschedule" });
}

/**
 * The idle timer of each thread of `from` (aliased `th`, joined to its project `p`), due at
 * `runAt`, with `payload` beside the thread id; `mode` says what an armed timer does.
 */
function idleTimerSql(
  from: SQL,
  runAt: SQL,
  now: string,
  mode: "keep" | "takeOver" | "earlierOrTakeOver",
  payload?: { pulled: true },
) {
  return scheduleJobsSql({ kind: "thread-idle", row: sql`th`, runAt, from, now, mode, payload });
}

/**
 * SQL for the idle timer, folded into the statement that appends a message: one job per thread,
 * keyed by thread, inserted only if none is waiting (a new message does not reschedule it; the job
 * re-reads the thread's last activity when it fires). Nothing when the timer is disabled.
 * `th` must expose the threads' id, project_id, dataset and settings: one thread (add message) or
 * several (a batch). The probe skips the (costly) speculative insert on the common path.
 *
 * A timer a worker holds is taken over (`takeOver`): that worker may have cut the episode before
 * this message and be about to delete its row, which took the message's timer with it (the
 * sweep's backstop re-armed it up to RETRY_INTERVAL_MS late). A waiting one is kept.
 */
export function idleJobSql(now: string): SQL {
  const interval = threadSetting("autoEpisodeIntervalMs", "bigint");
  return idleTimerSql(
    sql`FROM th JOIN ${projects} p ON p.id = th.project_id
    WHERE NOT ${jobWaitingSql("thread-idle", sql`th.id`, now)}
      AND ${threadSetting("enabled", "boolean")} AND ${interval} IS NOT NULL`,
    sql`${now}::timestamptz + make_interval(secs => ${interval} / 1000.0)`,
    now,
    "takeOver",
  );
}

/**
 * SQL for the pull-forward, folded into the statement that creates a thread: every sibling in
 * the same dataset with messages not yet in an episode gets its episode due within 5 minutes,
 * even when its idle timer is disabled (the spec: a new thread still triggers it). The job is
 * marked `pulled` so it cuts the episode when it fires instead of waiting for idleness. A timer a
 * worker is running is taken over (`earlierOrTakeOver`): finding the sibling not yet idle, that
 * worker's reschedule put the sibling's idle time back over the pull-forward.
 * `nt` must expose the new thread's id, project_id and dataset.
 */
export function pullForwardSql(now: string): SQL {
  const due = new Date(Date.parse(now) + PULL_FORWARD_MS).toISOString();
  return idleTimerSql(
    sql`FROM ${threads} th JOIN nt ON th.project_id = nt.project_id AND th.dataset = nt.dataset AND th.id <> nt.id
      JOIN ${projects} p ON p.id = th.project_id
    WHERE th.episode_due AND ${threadSetting("enabled", "boolean")}`,
    sql`${due}::timestamptz`,
    now,
    "earlierOrTakeOver",
    { pulled: true },
  );
}

/**
 * The sleep-time backstop: threads whose idle time has passed with messages not yet in an episode
 * and no timer waiting (a lost doorbell, a crash before the timer was written) get a due timer.
 * Disabled together with the timer (null interval). One statement; answers how many it armed.
 */
export async function scheduleMissedIdleTimers(deps: Deps, limit: number): Promise<number> {
  return rowsOf(await deps.db.execute(missedIdleTimersSql(deps.clock.now().toISOString(), limit))).length;
}

/**
 * The backstop's statement. It reads the threads with messages not yet in an episode alone
 * (`episode_due`, through its partial index), so a sweep costs the conversations under way (and
 * the threads of projects that turned episodes off), not every thread ever written to.
 */
export function missedIdleTimersSql(now: string, limit: number): SQL {
  const interval = threadSetting("autoEpisodeIntervalMs", "bigint");
  const from = sql`FROM ${threads} th JOIN ${projects} p ON p.id = th.project_id
    WHERE th.episode_due
      AND ${threadSetting("enabled", "boolean")}
      AND ${interval} IS NOT NULL
      AND th.last_message_at + make_interval(secs => ${interval} / 1000.0) <= ${now}::timestamptz
      AND NOT ${jobExistsSql("thread-idle", sql`th.id`)}
    LIMIT ${limit}`;
  return idleTimerSql(from, sql`${now}::timestamptz`, now, "keep");
}

// Where lib/threads.ts and lib/working/messages.ts found them before lib/jobs/schedule.ts owned them.
export { dueJobsFrom, ringLater };

/**
 * The CTEs that move the episodes of `target` (failed, locked) to pending with retryCount + 1 and
 * make their jobs due now: `requeued` and `job`.
 */
function requeueSql(now: string): SQL {
  return sql`
    requeued AS (
      UPDATE ${episodes} e SET status = 'pending', retry_count = e.retry_count + 1, updated_at = ${now}::timestamptz
      FROM target WHERE e.id = target.id
      RETURNING e.id, e.project_id, e.dataset
    ),
    job AS (${episodeJobSql(sql`FROM requeued r`, sql`r`, now)})`;
}

/**
 * The background retry, in one statement: failed episodes under their effective maxRetries whose
 * last failure is at least `olderThanMs` old go back to pending with retryCount + 1, jobs due now.
 */
export async function requeueFailedEpisodes(deps: Deps, scope: { olderThanMs: number; limit: number }) {
  const now = deps.clock.now().toISOString();
  const result = await deps.db.execute(sql`
    WITH target AS (
      SELECT e.id FROM ${episodes} e
        JOIN ${projects} p ON p.id = e.project_id
        LEFT JOIN ${threads} th ON th.id = e.thread_id
      WHERE e.status = 'failed'
        AND e.retry_count < ${episodicSetting("maxRetries", sql`th.settings`, sql`p.settings`, "int")}
        AND e.updated_at <= ${new Date(Date.parse(now) - scope.olderThanMs).toISOString()}::timestamptz
      ORDER BY e.updated_at LIMIT ${scope.limit}
      FOR UPDATE OF e SKIP LOCKED
    ),
    ${requeueSql(now)}
    SELECT r.id, j.key, j.run_at FROM requeued r JOIN job j ON j.key = ${jobKeySql("episode", sql`r.id`)}`);
  const rows = parsedRowsOf(z.object({ id: z.string(), key: z.string(), run_at: dbTimestampSet }), result);
  return { episodeIds: rows.map((r) => r.id), due: dueJobsFrom(rows) };
}

/**
 * `POST .../episodes/:id/retry`: failed only; bypasses the cap and the retry interval; processing
 * starts asynchronously. One statement also reports the episode's state, so "not found" and "not
 * failed" cost no second round trip.
 */
export async function retryEpisode({ deps, projectId }: ProjectContext, { episodeId }: { episodeId: string }) {
  const now = deps.clock.now().toISOString();
  const result = await deps.db.execute(sql`
    WITH target AS (
      SELECT e.id FROM ${episodes} e
      WHERE e.id = ${episodeId} AND e.project_id = ${projectId} AND e.status = 'failed'
      FOR UPDATE OF e
    ),
    ${requeueSql(now)}
    SELECT cur.status AS previous, j.key, j.run_at
    FROM (SELECT status FROM ${episodes} WHERE id = ${episodeId} AND project_id = ${projectId}) cur
      LEFT JOIN job j ON true`);
  const [row] = parsedRowsOf(
    z.object({ previous: z.string(), key: z.string().nullable(), run_at: dbTimestamp }),
    result,
  );
  if (!row) throw notFound("Episode not found");
  // Failed when the statement began but requeued meanwhile by the background retry: pending all the same.
  if (!row.key && row.previous !== "failed") throw badRequest("Only failed episodes can be retried");
  if (row.key) ringLater(deps, dueJobsFrom([{ key: row.key, run_at: row.run_at }]));
  return { episodeId, status: "pending" as const };
}

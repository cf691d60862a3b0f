import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbInt, parsedRowsOf } from "../db/rows";
import { projects, usageBudgetAlerts, usageMonthTokens } from "../db/schema";
import type { Deps } from "../deps";
import { HttpError } from "../errors";
import { projectSetting } from "../settings/sql";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";

/** A budget is per calendar month in UTC: the month `now` is in starts here. */
export function monthStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** The first instant of the next month (UTC), when a spent budget is whole again. */
export function nextMonthStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/**
 * When work paused by a spent budget looks again: a tenth short of `intervalMs` on, or the month's
 * end if sooner (a new month's budget is whole). Short, because the sweep that runs it comes every
 * `intervalMs` and claimed it a moment after its own start: a full interval on would fall just
 * after the next sweep, and the work would look again only every second sweep.
 */
export function budgetRecheckAt(now: Date, intervalMs: number): Date {
  return new Date(Math.min(now.getTime() + intervalMs - intervalMs / 10, nextMonthStart(now).getTime()));
}

/** The month's key, as the alerts table and the webhook event name it: YYYY-MM. */
export const monthKey = (now: Date) => monthStart(now).toISOString().slice(0, 7);

/** Where a project stands against its budget this month (null budget: none set). */
export interface BudgetState {
  monthlyTokenBudget: number | null;
  month: string;
  /** Tokens reported this month (calls that reported none are not counted: see docs/operations.md). */
  spent: number;
  remaining: number | null;
  exhausted: boolean;
  resetsAt: string;
}

export function budgetState(budget: number | null, spent: number, now: Date): BudgetState {
  return {
    monthlyTokenBudget: budget,
    month: monthKey(now),
    spent,
    remaining: budget === null ? null : Math.max(budget - spent, 0),
    exhausted: budget !== null && spent >= budget,
    resetsAt: nextMonthStart(now).toISOString(),
  };
}

/** The project's budget setting inside SQL, over its `settings` column. */
export const budgetSettingSql = (projectSettings: SQL) =>
  projectSetting("usage", "monthlyTokenBudget", projectSettings, "bigint");

/**
 * The tokens the project (`projectId`: SQL or an id) reported in the month of `now`, as bigint:
 * the month's total the ledger's triggers keep (usage_month_tokens, a few rows), not a sum over
 * the month's calls, which grows with them (382 ms at a million on the embedded database).
 */
export function monthSpentSql(projectId: SQL, now: Date): SQL {
  return monthTokensSql(projectId, sql`${monthStart(now).toISOString()}::timestamptz`);
}

/** The same for the month starting at `month` (SQL: a timestamptz, the month's first instant). */
function monthTokensSql(projectId: SQL, month: SQL): SQL {
  return sql`(SELECT coalesce(sum(m.tokens), 0)::bigint FROM ${usageMonthTokens} m
    WHERE m.project_id = ${projectId} AND m.month = ${month})`;
}

/**
 * Whether the project's budget is spent this month, as a boolean inside a statement; false with no
 * budget (the month's sum is then not read at all) or no such project. Folded into the statement
 * that decides (the episode's claim, recall's, chat's window): no round trip of its own.
 */
export function budgetSpentSql(projectId: SQL | string, now: Date): SQL {
  const id = typeof projectId === "string" ? sql`${projectId}::text` : projectId;
  return sql`coalesce((SELECT CASE WHEN b.budget IS NULL THEN false ELSE ${monthSpentSql(sql`b.id`, now)} >= b.budget END
    FROM (SELECT bp.id, ${budgetSettingSql(sql`bp.settings`)} AS budget FROM ${projects} bp WHERE bp.id = ${id}) b), false)`;
}

/**
 * How long into a month the sweep still looks at the month before: a budget spent after the
 * month's last sweep (its last RETRY_INTERVAL_MS) is announced by the new month's first ones, or
 * after a host that was down over the month's end is back. A day: a missed sweep or a restart
 * must not lose the event, and a budget lowered below the last month's total is rarely that soon.
 */
export const BUDGET_ALERT_GRACE_MS = 24 * 60 * 60 * 1000;

/** A month the sweep announces spent budgets of: its key, its first instant, when it ended. */
export interface AlertMonth {
  month: string;
  start: string;
  resetsAt: string;
}

/** The months a sweep at `now` looks at: this one, and the month before within its grace. */
export function budgetAlertMonths(now: Date, graceMs = BUDGET_ALERT_GRACE_MS): AlertMonth[] {
  const current = monthStart(now);
  const earliest = monthStart(new Date(now.getTime() - graceMs));
  const starts = earliest.getTime() < current.getTime() ? [earliest, current] : [current];
  return starts.map((start) => ({
    month: monthKey(start),
    start: start.toISOString(),
    resetsAt: nextMonthStart(start).toISOString(),
  }));
}

/**
 * The sweep's backstop `budgetAlerts`: every project whose budget is spent and not yet announced
 * gets its `usage.budget_exhausted` event, once per project and month (the alerts table's key),
 * naming the month that was spent: this one, or the one before (budgetAlertMonths). Against the
 * budget as it is now, so the month before only while the budget has not changed since it ended.
 * One statement; projects without a budget cost a look at their settings.
 */
export async function raiseBudgetAlerts(deps: Deps): Promise<number> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const months = JSON.stringify(budgetAlertMonths(now).map((m) => ({ ...m, resets_at: m.resetsAt })));
  const [row] = parsedRowsOf(
    z.object({ alerted: dbInt, webhook_jobs: z.unknown() }),
    await deps.db.execute(sql`
      WITH spent AS (
        SELECT p.id AS project_id, mo.month, mo.resets_at, b.budget,
          ${monthTokensSql(sql`p.id`, sql`mo.start`)} AS tokens
        FROM ${projects} p CROSS JOIN LATERAL (SELECT ${budgetSettingSql(sql`p.settings`)} AS budget) b
        CROSS JOIN jsonb_to_recordset(${months}::jsonb) AS mo(month text, start timestamptz, resets_at text)
        WHERE b.budget IS NOT NULL
          -- A month that ended before the budget last changed is not measured against it: it may
          -- have had none, or a higher one (a budget set or lowered on the 1st).
          AND (mo.resets_at::timestamptz > ${at}::timestamptz OR p.budget_changed_at IS NULL
            OR p.budget_changed_at < mo.resets_at::timestamptz)
          AND NOT EXISTS (SELECT 1 FROM ${usageBudgetAlerts} a WHERE a.project_id = p.id AND a.month = mo.month)
      ),
      alerted AS (
        INSERT INTO ${usageBudgetAlerts} (project_id, month, created_at)
        SELECT project_id, month, ${at}::timestamptz FROM spent WHERE tokens >= budget
        ON CONFLICT DO NOTHING
        RETURNING project_id, month
      ), ${webhookEventCtes(
        "usage.budget_exhausted",
        sql`SELECT s.project_id, jsonb_build_object('month', s.month, 'monthlyTokenBudget', s.budget,
          'spent', s.tokens, 'resetsAt', s.resets_at) AS data
          FROM alerted a JOIN spent s USING (project_id, month)`,
        at,
      )}
      SELECT (SELECT count(*) FROM alerted) AS alerted, ${webhookJobsColumn} AS webhook_jobs`),
  );
  ringWebhookJobs(deps, row?.webhook_jobs);
  return row?.alerted ?? 0;
}

/** Chat's answer while the budget is spent (the spec's error body; a 429, as a rate limit is). */
export const budgetExhausted = () =>
  new HttpError(
    429,
    "The project's monthly token budget is spent: chat resumes when the month ends (UTC) or the budget is raised (messages are still stored and recall still works)",
  );

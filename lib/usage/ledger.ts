import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ReadContext } from "../context";
import { dbInt, dbJson, parsedRowsOf } from "../db/rows";
import { projects, usageDays, usageEvents } from "../db/schema";
import type { ProjectRef } from "../db/types";
import { notFound } from "../errors";
import { type BudgetState, budgetSettingSql, budgetState, monthSpentSql, monthStart, nextMonthStart } from "./budget";

export const USAGE_GROUPINGS = ["day", "dataset", "operation", "model"] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/** The longest range one usage read covers. */
export const MAX_USAGE_RANGE_DAYS = 366;

export interface UsageQuery {
  /** Inclusive; default the start of the current month (UTC). */
  start?: Date;
  /** Exclusive; default the start of the next month (UTC): the whole current month. */
  end?: Date;
  groupBy: UsageGrouping;
  /** At most this many groups, largest first (datasets, operations, models); days are all listed, in order. */
  limit?: number;
}

/** Calls and tokens of a group; tokens summed over the calls that reported them. */
export interface UsageTotals {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  /** Calls whose provider reported no total: their tokens are unknown, not zero. */
  unknownCalls: number;
  /** Calls that got no answer (outcome error or aborted). */
  failedCalls: number;
}

/**
 * The range asked for, checked: start before end, at most MAX_USAGE_RANGE_DAYS. A bad range is a
 * validation error naming the parameter (a default depends on the clock, so the route's schema
 * cannot check it).
 */
export function usageRange(query: Pick<UsageQuery, "start" | "end">, now: Date): { start: Date; end: Date } {
  const end = query.end ?? nextMonthStart(now);
  const start = query.start ?? monthStart(now);
  const issue = (message: string) =>
    new z.ZodRealError([{ code: "custom", path: [query.start ? "start" : "end"], message, input: undefined }]);
  if (start.getTime() >= end.getTime()) {
    throw issue("start must be before end (by default the range is the current month, UTC)");
  }
  if (end.getTime() - start.getTime() > MAX_USAGE_RANGE_DAYS * 86_400_000) {
    throw issue(`The range from start to end may cover at most ${MAX_USAGE_RANGE_DAYS} days`);
  }
  return { start, end };
}

const DAY_MS = 86_400_000;

/**
 * Where a range's calls are read: the whole UTC days inside it from the daily sums (usage_days),
 * the part of a day at either end from the ledger's rows (at most two partial days, whatever the
 * range's length). A range within one day is read from the ledger alone.
 */
export function usageSpans(range: { start: Date; end: Date }): {
  days: { from: string; to: string } | null;
  calls: { start: Date; end: Date }[];
} {
  const firstWholeDay = Math.ceil(range.start.getTime() / DAY_MS) * DAY_MS;
  const lastWholeDayEnd = Math.floor(range.end.getTime() / DAY_MS) * DAY_MS;
  if (firstWholeDay >= lastWholeDayEnd) return { days: null, calls: [range] };
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const calls = [
    { start: range.start, end: new Date(firstWholeDay) },
    { start: new Date(lastWholeDayEnd), end: range.end },
  ].filter((span) => span.start.getTime() < span.end.getTime());
  return { days: { from: day(firstWholeDay), to: day(lastWholeDayEnd) }, calls };
}

/** The group's key as SQL over a ledger row `u` (one call). */
const CALL_KEYS: Record<UsageGrouping, SQL> = {
  day: sql`to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  dataset: sql`u.dataset`,
  operation: sql`u.operation`,
  model: sql`u.model`,
};

/** The group's key as SQL over a daily sum `d` (its dataset '' is a call of none). */
const DAY_KEYS: Record<UsageGrouping, SQL> = {
  day: sql`to_char(d.day, 'YYYY-MM-DD')`,
  dataset: sql`nullif(d.dataset, '')`,
  operation: sql`d.operation`,
  model: sql`d.model`,
};

const Totals = {
  calls: dbInt,
  input_tokens: dbInt,
  output_tokens: dbInt,
  total_tokens: dbInt,
  unknown_calls: dbInt,
  failed_calls: dbInt,
};
const GroupRow = z.object({ grp: z.enum(USAGE_GROUPINGS), key: z.string().nullable(), ...Totals });
const UsageRow = z.object({
  project_found: z.boolean(),
  budget: dbInt.nullable(),
  month_spent: dbInt,
  groups: dbJson(z.array(GroupRow)),
});

const totalsOf = (r: z.output<typeof GroupRow>): UsageTotals => ({
  calls: r.calls,
  inputTokens: r.input_tokens,
  outputTokens: r.output_tokens,
  totalTokens: r.total_tokens,
  unknownCalls: r.unknown_calls,
  failedCalls: r.failed_calls,
});

/** The totals of the groups (what the range cost altogether). */
export function sumTotals(groups: UsageTotals[]): UsageTotals {
  const sum = { calls: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, unknownCalls: 0, failedCalls: 0 };
  for (const g of groups) for (const k of Object.keys(sum) as (keyof UsageTotals)[]) sum[k] += g[k];
  return sum;
}

/**
 * The statement of a usage read: the project's ledger over a range, grouped one or more ways at
 * once (GROUPING SETS), with where it stands against its budget in the month of `now`. Days come
 * oldest first; other groups largest first (total tokens, then calls).
 */
export function usageGroupsSql(
  projectId: ProjectRef,
  range: { start: Date; end: Date },
  by: UsageGrouping[],
  now: Date,
) {
  const sets = sql.join(
    by.map((g) => sql.raw(`(k_${g})`)),
    sql`, `,
  );
  const which = sql.join(
    by.map((g) => sql`WHEN GROUPING(${sql.raw(`k_${g}`)}) = 0 THEN ${g}::text`),
    sql` `,
  );
  const keyOf = sql.join(
    by.map((g) => sql`WHEN GROUPING(${sql.raw(`k_${g}`)}) = 0 THEN ${sql.raw(`k_${g}`)}`),
    sql` `,
  );
  const keys = (of: Record<UsageGrouping, SQL>) =>
    sql.join(
      by.map((g) => sql`${of[g]} AS ${sql.raw(`k_${g}`)}`),
      sql`, `,
    );
  const at = (d: Date) => sql`${d.toISOString()}::timestamptz`;
  const spans = usageSpans(range);
  // Whole days from their sums, the ends' partial days from their calls: the same columns.
  const parts: SQL[] = [];
  if (spans.days) {
    parts.push(sql`
        SELECT d.calls, d.input_tokens, d.output_tokens, d.total_tokens, d.unknown_calls, d.failed_calls, ${keys(DAY_KEYS)}
        FROM ${usageDays} d
        WHERE d.project_id = (SELECT id FROM p) AND d.day >= ${spans.days.from}::date AND d.day < ${spans.days.to}::date`);
  }
  if (spans.calls.length > 0) {
    parts.push(sql`
        SELECT 1, coalesce(u.input_tokens, 0), coalesce(u.output_tokens, 0), coalesce(u.total_tokens, 0),
          (u.total_tokens IS NULL)::int, (u.outcome <> 'ok')::int, ${keys(CALL_KEYS)}
        FROM ${usageEvents} u
        WHERE u.project_id = (SELECT id FROM p) AND (${sql.join(
          spans.calls.map((span) => sql`(u.created_at >= ${at(span.start)} AND u.created_at < ${at(span.end)})`),
          sql` OR `,
        )})`);
  }
  return sql`
    WITH p AS (SELECT id, ${budgetSettingSql(sql`settings`)} AS budget FROM ${projects} WHERE id = ${projectId}),
    g AS (
      SELECT CASE ${which} END AS grp, CASE ${keyOf} END AS key, sum(calls)::int AS calls,
        sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens,
        sum(total_tokens)::bigint AS total_tokens, sum(unknown_calls)::int AS unknown_calls,
        sum(failed_calls)::int AS failed_calls
      FROM (${sql.join(parts, sql` UNION ALL `)}) u (calls, input_tokens, output_tokens, total_tokens, unknown_calls, failed_calls)
      GROUP BY GROUPING SETS (${sets})
      -- A key whose calls were all pruned keeps daily rows summing to nothing: not a group.
      HAVING sum(calls) <> 0
    )
    SELECT EXISTS (SELECT 1 FROM p) AS project_found, (SELECT budget FROM p) AS budget,
      ${monthSpentSql(sql`(SELECT id FROM p)`, now)} AS month_spent,
      coalesce((SELECT json_agg(g ORDER BY grp,
        CASE WHEN grp = 'day' THEN key END, total_tokens DESC, calls DESC, key) FROM g), '[]'::json) AS groups`;
}

/**
 * A usage read in one statement (for a /v1 read, the API key's check rides in the same round
 * trip), and its groups by grouping.
 */
async function usageGroups({ deps, projectId }: ReadContext, range: { start: Date; end: Date }, by: UsageGrouping[]) {
  const now = deps.clock.now();
  const [row] = parsedRowsOf(UsageRow, await deps.db.execute(usageGroupsSql(projectId, range, by, now)));
  // Only the dashboard can name a project that does not exist (a /v1 key always has one).
  if (!row?.project_found) throw notFound("Project not found");
  const groupsOf = (grouping: UsageGrouping) =>
    row.groups.filter((g) => g.grp === grouping).map((g) => ({ key: g.key, ...totalsOf(g) }));
  return { groupsOf, budget: budgetState(row.budget, row.month_spent, now) satisfies BudgetState };
}

/** `GET /v1/usage`: the range grouped one way, the totals of every call, the budget. */
export async function readUsage(ctx: ReadContext, query: UsageQuery) {
  const range = usageRange(query, ctx.deps.clock.now());
  const { groupsOf, budget } = await usageGroups(ctx, range, [query.groupBy]);
  const groups = groupsOf(query.groupBy);
  const shown = query.groupBy === "day" || query.limit === undefined ? groups : groups.slice(0, query.limit);
  return {
    start: range.start.toISOString(),
    end: range.end.toISOString(),
    groupBy: query.groupBy,
    groups: shown,
    total: sumTotals(groups),
    budget,
  };
}

/** How many datasets the dashboard's usage page lists. */
export const TOP_DATASETS = 10;

/**
 * The dashboard's usage page in one statement: tokens per day, the top datasets, every operation
 * and model, the totals and the budget.
 */
export async function usageOverview(ctx: ReadContext, query: Pick<UsageQuery, "start" | "end">) {
  const range = usageRange(query, ctx.deps.clock.now());
  const { groupsOf, budget } = await usageGroups(ctx, range, ["day", "dataset", "operation", "model"]);
  const days = groupsOf("day");
  return {
    start: range.start.toISOString(),
    end: range.end.toISOString(),
    days,
    datasets: groupsOf("dataset").slice(0, TOP_DATASETS),
    operations: groupsOf("operation"),
    models: groupsOf("model"),
    total: sumTotals(days),
    budget,
  };
}

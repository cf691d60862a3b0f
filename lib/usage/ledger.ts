import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import type { ReadContext } from "../context";
import { dbInt, dbJson, parsedRowsOf } from "../db/rows";
import { projects, usageEvents } from "../db/schema";
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

/** The group's key as SQL over the ledger row `u`. */
const GROUP_KEYS: Record<UsageGrouping, SQL> = {
  day: sql`to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  dataset: sql`u.dataset`,
  operation: sql`u.operation`,
  model: sql`u.model`,
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
 * The project's ledger over a range, grouped one or more ways at once (GROUPING SETS), with where
 * it stands against its budget this month: one statement (for a /v1 read, the API key's check
 * rides in the same round trip). Days come oldest first; other groups largest first (total
 * tokens, then calls).
 */
async function usageGroups({ deps, projectId }: ReadContext, range: { start: Date; end: Date }, by: UsageGrouping[]) {
  const now = deps.clock.now();
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
  const result = await deps.db.execute(sql`
    WITH p AS (SELECT id, ${budgetSettingSql(sql`settings`)} AS budget FROM ${projects} WHERE id = ${projectId}),
    g AS (
      SELECT CASE ${which} END AS grp, CASE ${keyOf} END AS key, count(*)::int AS calls,
        coalesce(sum(input_tokens), 0)::bigint AS input_tokens,
        coalesce(sum(output_tokens), 0)::bigint AS output_tokens,
        coalesce(sum(total_tokens), 0)::bigint AS total_tokens,
        count(*) FILTER (WHERE total_tokens IS NULL)::int AS unknown_calls,
        count(*) FILTER (WHERE outcome <> 'ok')::int AS failed_calls
      FROM (
        SELECT u.input_tokens, u.output_tokens, u.total_tokens, u.outcome, ${sql.join(
          by.map((g) => sql`${GROUP_KEYS[g]} AS ${sql.raw(`k_${g}`)}`),
          sql`, `,
        )}
        FROM ${usageEvents} u
        WHERE u.project_id = (SELECT id FROM p)
          AND u.created_at >= ${range.start.toISOString()}::timestamptz AND u.created_at < ${range.end.toISOString()}::timestamptz
      ) u
      GROUP BY GROUPING SETS (${sets})
    )
    SELECT EXISTS (SELECT 1 FROM p) AS project_found, (SELECT budget FROM p) AS budget,
      ${monthSpentSql(sql`(SELECT id FROM p)`, now)} AS month_spent,
      coalesce((SELECT json_agg(g ORDER BY grp,
        CASE WHEN grp = 'day' THEN key END, total_tokens DESC, calls DESC, key) FROM g), '[]'::json) AS groups`);
  const [row] = parsedRowsOf(UsageRow, result);
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

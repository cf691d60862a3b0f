import { type SQL, sql } from "drizzle-orm";
import { projects, usageEvents } from "../db/schema";
import type { Deps } from "../deps";
import type { UsageEvent } from "../llm/usage";
import { errorFields } from "../log";
import type { UsageCollector } from "./collector";

/** Whose calls they were: the project (an id, or SQL finding it, as a /v1 read has it) and the dataset. */
export interface UsageScope {
  projectId: string | SQL;
  /** Null for a call of no dataset; SQL for a dataset the statement itself reads (a thread's). */
  dataset: string | SQL | null;
}

/** The events as one jsonb parameter: the statement's text is the same whatever their number. */
function eventsJson(events: UsageEvent[]): string {
  return JSON.stringify(
    events.map((e) => ({
      operation: e.operation,
      kind: e.kind,
      model: e.model,
      input_tokens: e.inputTokens,
      output_tokens: e.outputTokens,
      total_tokens: e.totalTokens,
      outcome: e.outcome,
    })),
  );
}

/**
 * `INSERT INTO usage_events …` for the events: the one way a ledger row is written. A project that
 * is gone (deleted meanwhile, or the NULL of a refused API key) gets no row instead of failing the
 * statement it rides in.
 */
export function usageInsertSql(events: UsageEvent[], scope: UsageScope, at: string): SQL {
  const dataset = scope.dataset === null ? sql`NULL::text` : sql`(${scope.dataset})::text`;
  return sql`INSERT INTO ${usageEvents} (project_id, dataset, operation, kind, model, input_tokens, output_tokens,
      total_tokens, outcome, created_at)
    SELECT p.id, ${dataset}, u.operation, u.kind, u.model, u.input_tokens, u.output_tokens, u.total_tokens,
      u.outcome, ${at}::timestamptz
    FROM (SELECT (${scope.projectId})::text AS id) p
    CROSS JOIN jsonb_to_recordset(${eventsJson(events)}::jsonb) AS u(operation text, kind text, model text,
      input_tokens int, output_tokens int, total_tokens int, outcome text)
    WHERE EXISTS (SELECT 1 FROM ${projects} WHERE id = p.id)`;
}

/**
 * The collector's events as a CTE to follow the other CTEs of the statement that stores the
 * work's result: `WITH a AS (…)${withUsage(…)} SELECT …`. Empty (no CTE, the statement's usual
 * text) when there is nothing to record. A data-modifying CTE runs whether or not it is read.
 */
export function withUsage(usage: UsageCollector | undefined, scope: UsageScope, at: string): SQL {
  const cte = usageCteOf(usage, scope, at);
  return cte ? sql`, ${cte}` : sql``;
}

/** The CTE alone (`usage_recorded AS (…)`), for a statement that joins its CTEs itself; null when empty. */
export function usageCteOf(usage: UsageCollector | undefined, scope: UsageScope, at: string): SQL | null {
  const events = usage?.take() ?? [];
  return events.length ? sql`usage_recorded AS (${usageInsertSql(events, scope, at)})` : null;
}

/** The same CTE opening a statement that has no other: `${leadingUsage(…)}INSERT …`. */
export function leadingUsage(usage: UsageCollector | undefined, scope: UsageScope, at: string): SQL {
  const events = usage?.take() ?? [];
  return events.length ? sql`WITH usage_recorded AS (${usageInsertSql(events, scope, at)}) ` : sql``;
}

/**
 * What no statement took (a call that failed with nothing stored after it, a result stored by a
 * statement that could not carry it): one statement, only then. A failure to record is logged,
 * never thrown over the work's own outcome.
 */
export async function flushUsage(deps: Deps, usage: UsageCollector, scope: UsageScope): Promise<void> {
  const events = usage.take();
  if (events.length === 0) return;
  try {
    await deps.db.execute(usageInsertSql(events, scope, deps.clock.now().toISOString()));
  } catch (err) {
    deps.log.error("usage: could not record provider calls", { calls: events.length, ...errorFields(err) });
  }
}

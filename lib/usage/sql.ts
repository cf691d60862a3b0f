import { type SQL, sql } from "drizzle-orm";
import { commitWithoutFlush } from "../db/commit";
import { projects, usageEvents } from "../db/schema";
import type { Deps } from "../deps";
import type { UsageEvent } from "../llm/usage";
import { errorFields } from "../log";
import { type CarriedUsage, USAGE_CARRY_MS, type UsageOwner } from "./backlog";
import { type UsageCollector, usageCollector } from "./collector";

/** Whose calls they were: the project (an id, or SQL finding it, as a /v1 read has it) and the dataset. */
export interface UsageScope {
  projectId: string | SQL;
  /** Null for a call of no dataset; SQL for a dataset the statement itself reads (a thread's). */
  dataset: string | SQL | null;
}

/** A call as the ledger's jsonb rows spell it (jsonb_to_recordset's columns: LEDGER_COLUMNS). */
function ledgerJson(e: UsageEvent) {
  return {
    operation: e.operation,
    kind: e.kind,
    model: e.model,
    input_tokens: e.inputTokens,
    output_tokens: e.outputTokens,
    total_tokens: e.totalTokens,
    outcome: e.outcome,
  };
}

const LEDGER_COLUMNS = sql.raw(`operation text, kind text, model text, input_tokens int, output_tokens int,
      total_tokens int, outcome text`);
const INSERT_LEDGER = sql`INSERT INTO ${usageEvents} (project_id, dataset, operation, kind, model, input_tokens,
      output_tokens, total_tokens, outcome, created_at)`;
const LEDGER_VALUES = sql.raw(
  `u.operation, u.kind, u.model, u.input_tokens, u.output_tokens, u.total_tokens, u.outcome`,
);

/**
 * `INSERT INTO usage_events …` for the events: the one way a ledger row is written. The events go
 * as one jsonb parameter, so the statement's text is the same whatever their number. A project
 * that is gone (deleted meanwhile, or the NULL of a refused API key) gets no row instead of
 * failing the statement it rides in. `flush: "none"` where the ledger's is the statement's only
 * write (readUsageCteOf says why); otherwise the row is flushed with the statement's other writes.
 */
export function usageInsertSql(
  events: UsageEvent[],
  scope: UsageScope,
  at: string,
  { flush }: { flush: "with-statement" | "none" } = { flush: "with-statement" },
): SQL {
  const dataset = scope.dataset === null ? sql`NULL::text` : sql`(${scope.dataset})::text`;
  const unflushed = flush === "none" ? sql` AND ${commitWithoutFlush}` : sql``;
  return sql`${INSERT_LEDGER}
    SELECT p.id, ${dataset}, ${LEDGER_VALUES}, ${at}::timestamptz
    FROM (SELECT (${scope.projectId})::text AS id) p
    CROSS JOIN jsonb_to_recordset(${JSON.stringify(events.map(ledgerJson))}::jsonb) AS u(${LEDGER_COLUMNS})
    WHERE EXISTS (SELECT 1 FROM ${projects} WHERE id = p.id)${unflushed}`;
}

/**
 * The same for calls of any projects and datasets, each with its own time (the backlog's). Its
 * statements (the API key's stamp, or one of its own) hold no client data, so it commits without
 * a flush of its own, as a read's ledger row does (readUsageCteOf).
 */
export function carriedUsageSql(calls: CarriedUsage[]): SQL {
  const rows = calls.map((c) => ({ ...ledgerJson(c), project_id: c.projectId, dataset: c.dataset, at: c.at }));
  return sql`${INSERT_LEDGER}
    SELECT u.project_id, u.dataset, ${LEDGER_VALUES}, u.at
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      AS u(project_id text, dataset text, at timestamptz, ${LEDGER_COLUMNS})
    WHERE EXISTS (SELECT 1 FROM ${projects} WHERE id = u.project_id) AND ${commitWithoutFlush}`;
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

/**
 * Runs a statement that records the collector's calls (built by `run` from `carried`, e.g. with
 * withUsage). They are taken for it; if it fails they were rolled back with it, so they go back to
 * `usage` for the statement that records the failure, or a later one. Calls it did not take stay.
 */
export async function carryingUsage<T>(
  usage: UsageCollector,
  run: (carried: UsageCollector) => Promise<T>,
): Promise<T> {
  const events = usage.take();
  const carried = usageCollector();
  carried.giveBack(events);
  try {
    const result = await run(carried);
    usage.giveBack(carried.take());
    return result;
  } catch (err) {
    usage.giveBack(events);
    throw err;
  }
}

/** The CTE alone (`usage_recorded AS (…)`), for a statement that joins its CTEs itself; null when empty. */
export function usageCteOf(
  usage: UsageCollector | undefined,
  scope: UsageScope,
  at: string,
  options?: Parameters<typeof usageInsertSql>[3],
): SQL | null {
  const events = usage?.take() ?? [];
  return events.length ? sql`usage_recorded AS (${usageInsertSql(events, scope, at, options)})` : null;
}

/**
 * usageCteOf for a read's statement (recall, episode search), whose only write is this ledger
 * row: it commits without a flush of its own (lib/db/commit.ts). A read then makes no disk sync
 * on a durable host: an uncached recall paid an fsync on the embedded database, 0.3-0.9 ms on the
 * bench machine's disk (bench/RESULTS.md, morning of 2026-11-30, later still). The next write's
 * flush takes the row to the disk with it. What a power cut can lose is the ledger rows of the
 * reads since the last write; a process crash loses none (the operating system has them). Never
 * for a statement that also stores a client's data.
 */
export function readUsageCteOf(usage: UsageCollector | undefined, scope: UsageScope, at: string): SQL | null {
  return usageCteOf(usage, scope, at, { flush: "none" });
}

/**
 * What no statement took (a call that failed with nothing stored after it, a result stored by a
 * statement that could not carry it): one statement, only then, committed without a flush of its
 * own as every statement whose only write is the ledger's (readUsageCteOf). A failure to record is
 * logged, never thrown over the work's own outcome.
 */
export async function flushUsage(deps: Deps, usage: UsageCollector, scope: UsageScope): Promise<void> {
  const events = usage.take();
  if (events.length === 0) return;
  try {
    await deps.db.execute(usageInsertSql(events, scope, deps.clock.now().toISOString(), { flush: "none" }));
  } catch (err) {
    deps.log.error("usage: could not record provider calls", { calls: events.length, ...errorFields(err) });
  }
}

/**
 * Calls made after the request's last statement (a /v1 request's reranker or synthesis, a chat
 * call with no reply to store): into the backlog, for the next API key check to carry
 * (lib/usage/backlog.ts); what none carried within USAGE_CARRY_MS, one statement writes after the
 * response. No statement on the request's own path either way.
 */
export function deferUsage(deps: Deps, usage: UsageCollector, owner: UsageOwner) {
  if (usage.pending === 0) return;
  deps.usageBacklog.add(usage.take(), owner, deps.clock.now().toISOString());
  deps.defer(flushBacklogLater(deps));
}

async function flushBacklogLater(deps: Deps): Promise<void> {
  await deps.usageBacklog.wait(USAGE_CARRY_MS);
  await writeWaitingUsage(deps);
}

/**
 * Writes every call waiting in the backlog now, in one statement (a host shutting down, the
 * deferred flush). A failure gives them back (returnToBacklog), never throws.
 */
export async function writeWaitingUsage(deps: Deps): Promise<void> {
  const calls = deps.usageBacklog.take();
  if (calls.length === 0) return;
  try {
    await deps.db.execute(carriedUsageSql(calls));
  } catch (err) {
    returnToBacklog(deps, calls, err);
  }
}

/**
 * Calls whose carrying statement failed: back to the backlog, or dropped (logged) at the last
 * attempt. Those given back get another write of their own USAGE_CARRY_MS on, unless a key
 * check carries them first (on the Worker through `waitUntil`, as the first one was): without it
 * they would wait for the next /v1 request, or be lost by a shutdown before it.
 */
export function returnToBacklog(deps: Deps, calls: CarriedUsage[], err: unknown) {
  const dropped = deps.usageBacklog.giveBack(calls);
  deps.log.error("usage: could not record provider calls", {
    calls: calls.length,
    dropped: dropped.length,
    ...errorFields(err),
  });
  if (dropped.length < calls.length) deps.defer(flushBacklogLater(deps));
}

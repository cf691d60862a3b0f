import { type SQL, sql } from "drizzle-orm";
import { webhookDeliveries, webhookEndpoints } from "../db/schema";
import type { Deps } from "../deps";
import { newIdSql } from "../ids";
import { dueJobsFromJson, dueJobsJson, ringLater, scheduleJobsSql } from "../jobs/schedule";

/** The events a project can subscribe an endpoint to. */
export const WEBHOOK_EVENT_TYPES = [
  "episode.completed",
  "episode.failed",
  "facts.extracted",
  "thread.compacted",
  "dataset.erased",
  "usage.budget_exhausted",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Deliveries are retried for this long after the event (or after a replay). */
export const WEBHOOK_RETRY_WINDOW_MS = 24 * 60 * 60 * 1000;

/**
 * CTEs that queue one event, folded into the statement where the event happens (no extra round
 * trip): for every enabled endpoint of the project subscribed to `type`, a delivery (`whd_…`,
 * body `{type, timestamp, data}`) and its job (`webhook:<deliveryId>`, due now). `source` is a
 * SELECT of rows `(project_id, data jsonb)`, usually over an earlier CTE of the same statement;
 * no row, no event. Follow other CTEs with `, ${webhookEventCtes(…)}` (or start a WITH with it)
 * and select {@link webhookJobsColumn} to ring the jobs ({@link ringWebhookJobs}).
 */
export function webhookEventCtes(type: WebhookEventType, source: SQL, now: string): SQL {
  return sql`wh_src AS (${source}),
    wh_d AS (
      INSERT INTO ${webhookDeliveries} (id, endpoint_id, project_id, event_type, payload, status, next_attempt_at,
        retry_until, created_at, updated_at)
      SELECT ${newIdSql("whd")}, ep.id, ep.project_id, ${type}::text,
        jsonb_build_object('type', ${type}::text, 'timestamp', ${now}::text, 'data', s.data),
        'pending', ${now}::timestamptz, ${now}::timestamptz + make_interval(secs => ${WEBHOOK_RETRY_WINDOW_MS / 1000}),
        ${now}::timestamptz, ${now}::timestamptz
      FROM wh_src s JOIN ${webhookEndpoints} ep ON ep.project_id = s.project_id
      WHERE ep.disabled_at IS NULL AND ep.event_types @> jsonb_build_array(${type}::text)
      RETURNING id, project_id),
    wh_j AS (${webhookJobsSql(sql`FROM wh_d d`, sql`d`, now, "keep")})`;
}

/**
 * The delivery jobs of the deliveries of `from` (aliased `row`, with id and project_id), due now,
 * for a CTE `wh_j` of the statement (select {@link webhookJobsColumn} to ring them).
 */
export function webhookJobsSql(from: SQL, row: SQL, now: string, mode: "keep" | "replaceOrRearm"): SQL {
  return scheduleJobsSql({
    kind: "webhook",
    row,
    dataset: sql`NULL`,
    runAt: sql`${now}::timestamptz`,
    from,
    now,
    mode,
  });
}

/** The jobs {@link webhookEventCtes} queued, as a JSON array of `{key, runAt}` (select it `AS webhook_jobs`). */
export const webhookJobsColumn = dueJobsJson("wh_j");

/** Rings the doorbells of the queued deliveries after the response (a lost ring: the sweep delivers). */
export function ringWebhookJobs(deps: Deps, value: unknown) {
  ringLater(deps, dueJobsFromJson(value), "deliver the webhook");
}

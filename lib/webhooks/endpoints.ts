import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { dbInt, dbJson, dbTimestamp, dbTimestampSet, parsedRowsOf, rowsOf, toIso } from "../db/rows";
import { jobs, projects, webhookAttempts, webhookDeliveries, webhookEndpoints } from "../db/schema";
import type { Deps } from "../deps";
import { conflict, notFound } from "../errors";
import { newId } from "../ids";
import { jobKeySql } from "../jobs/kinds";
import { projectFoundColumn, requireProject } from "../projects";
import { newWebhookSecret, openStreakSql, SECRET_OVERLAP_MS } from "./deliver";
import {
  ringWebhookJobs,
  WEBHOOK_RETRY_WINDOW_MS,
  type WebhookEventType,
  webhookJobsColumn,
  webhookJobsSql,
} from "./events";
import { checkWebhookUrl } from "./url";

const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** An endpoint as the dashboard lists it (never its secret). */
export interface WebhookEndpointRecord {
  id: string;
  projectId: string;
  url: string;
  eventTypes: string[];
  createdAt: string;
  failingSince: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
  lastDelivery: {
    id: string;
    eventType: string;
    status: DeliveryStatus;
    statusCode: number | null;
    error: string | null;
    at: string;
  } | null;
  /** The soonest attempt waiting for this endpoint (a retry or a new event). */
  nextAttemptAt: string | null;
  pendingDeliveries: number;
}

/** An endpoint as `endpointSelect` reads it. */
const EndpointRow = z.object({
  id: z.string(),
  project_id: z.string(),
  url: z.string(),
  event_types: dbJson(z.array(z.string())),
  created_at: dbTimestampSet,
  failing_since: dbTimestamp,
  disabled_at: dbTimestamp,
  disabled_reason: z.string().nullable(),
  last_delivery: dbJson(
    z
      .object({
        id: z.string(),
        eventType: z.string(),
        status: z.enum(DELIVERY_STATUSES),
        statusCode: z.number().nullable(),
        error: z.string().nullable(),
        at: z.string(),
      })
      .nullable(),
  ),
  next_attempt_at: dbTimestamp,
  pending: dbInt,
});
type EndpointRow = z.output<typeof EndpointRow>;

function endpointRecord(r: EndpointRow): WebhookEndpointRecord {
  const last = r.last_delivery;
  return {
    id: r.id,
    projectId: r.project_id,
    url: r.url,
    eventTypes: r.event_types,
    createdAt: toIso(r.created_at) as string,
    failingSince: toIso(r.failing_since),
    disabledAt: toIso(r.disabled_at),
    disabledReason: r.disabled_reason,
    lastDelivery: last ? { ...last, at: toIso(last.at) as string } : null,
    nextAttemptAt: toIso(r.next_attempt_at),
    pendingDeliveries: r.pending,
  };
}

/** The endpoints `where` selects as EndpointRow, their failure streak as of `now` (an ended one shows none). */
export const endpointSelect = (where: ReturnType<typeof sql>, now: string) => sql`
  SELECT ep.id, ep.project_id, ep.url, ep.event_types, ep.created_at, ${openStreakSql(now, "ep")} AS failing_since,
    ep.disabled_at, ep.disabled_reason,
    (SELECT json_build_object('id', d.id, 'eventType', d.event_type, 'status', d.status, 'statusCode', d.last_status_code,
        'error', d.last_error, 'at', d.updated_at)
       FROM ${webhookDeliveries} d WHERE d.endpoint_id = ep.id AND d.attempts > 0
       ORDER BY d.updated_at DESC, d.id DESC LIMIT 1) AS last_delivery,
    (SELECT min(d.next_attempt_at) FROM ${webhookDeliveries} d WHERE d.endpoint_id = ep.id AND d.status = 'pending') AS next_attempt_at,
    (SELECT count(*) FROM ${webhookDeliveries} d WHERE d.endpoint_id = ep.id AND d.status = 'pending') AS pending
  FROM ${webhookEndpoints} ep WHERE ${where}`;

/**
 * The URL as stored, once the policy accepts it (lib/webhooks/url.ts); a refusal is the spec's
 * validation shape with the field named, as the body's other fields are refused.
 */
function acceptedUrl(deps: Deps, url: string): string {
  const decision = checkWebhookUrl(url, { allowHttp: deps.config.webhooks.allowHttp });
  if (!decision.ok) throw new z.ZodRealError([{ code: "custom", path: ["url"], message: decision.reason, input: url }]);
  return decision.url.toString();
}

/** Registers an endpoint; the secret is returned here and never again. */
export async function createWebhookEndpoint(
  { deps, projectId }: ProjectContext,
  input: { url: string; eventTypes: WebhookEventType[] },
) {
  const url = acceptedUrl(deps, input.url);
  const eventTypes = [...new Set(input.eventTypes)];
  const secret = newWebhookSecret();
  const id = newId("whk");
  const now = deps.clock.now().toISOString();
  const rows = parsedRowsOf(
    EndpointRow,
    await deps.db.execute(sql`
      WITH ins AS (
        INSERT INTO ${webhookEndpoints} (id, project_id, url, secret, event_types, created_at)
        SELECT ${id}, p.id, ${url}, ${secret}, ${JSON.stringify(eventTypes)}::jsonb, ${now}::timestamptz
        FROM ${projects} p WHERE p.id = ${projectId}
        RETURNING *
      )
      SELECT ins.id, ins.project_id, ins.url, ins.event_types, ins.created_at, ins.failing_since, ins.disabled_at,
        ins.disabled_reason, NULL AS last_delivery, NULL AS next_attempt_at, 0 AS pending
      FROM ins`),
  );
  if (!rows[0]) throw notFound("Project not found");
  return { secret, endpoint: endpointRecord(rows[0]) };
}

/** A page of the project's endpoints, newest first, and how many it has; one statement. */
export async function listWebhookEndpoints(
  { deps, projectId }: ProjectContext,
  page: { limit: number; offset: number } = { limit: 20, offset: 0 },
) {
  const [row] = parsedRowsOf(
    z.object({ found: dbInt, total: dbInt, page: dbJson(z.array(EndpointRow)) }),
    await deps.db.execute(sql`
      SELECT ${projectFoundColumn(projectId)},
        (SELECT count(*) FROM ${webhookEndpoints} WHERE project_id = ${projectId})::int AS total,
        coalesce((SELECT json_agg(row_to_json(p) ORDER BY p.created_at DESC, p.id DESC) FROM (
          ${endpointSelect(sql`ep.project_id = ${projectId}`, deps.clock.now().toISOString())}
          ORDER BY ep.created_at DESC, ep.id DESC LIMIT ${page.limit} OFFSET ${page.offset}) p), '[]'::json) AS page`),
  );
  requireProject(row);
  return { endpoints: row.page.map(endpointRecord), total: row.total };
}

async function getEndpoint(deps: Deps, id: string) {
  const [row] = parsedRowsOf(
    EndpointRow,
    await deps.db.execute(endpointSelect(sql`ep.id = ${id}`, deps.clock.now().toISOString())),
  );
  if (!row) throw notFound("Webhook endpoint not found");
  return endpointRecord(row);
}

/** Deletes the endpoint with its deliveries; their queued jobs find nothing and end. */
export async function deleteWebhookEndpoint(deps: Deps, { endpointId: id }: { endpointId: string }) {
  const deleted = rowsOf(
    await deps.db.execute(sql`
      WITH ep AS (DELETE FROM ${webhookEndpoints} WHERE id = ${id} RETURNING id),
      j AS (
        DELETE FROM ${jobs} WHERE key IN (
          SELECT ${jobKeySql("webhook", sql`d.id`)} FROM ${webhookDeliveries} d
          WHERE d.endpoint_id IN (SELECT id FROM ep) AND d.status = 'pending')
          AND locked_until IS NULL
        RETURNING 1)
      SELECT id FROM ep`),
  );
  if (deleted.length === 0) throw notFound("Webhook endpoint not found");
}

/** A disabled endpoint receives events again (its failure streak starts over). */
export async function enableWebhookEndpoint(deps: Deps, { endpointId: id }: { endpointId: string }) {
  const updated = await deps.db
    .update(webhookEndpoints)
    .set({ disabledAt: null, disabledReason: null, failingSince: null, lastFailedAt: null })
    .where(eq(webhookEndpoints.id, id))
    .returning({ id: webhookEndpoints.id });
  if (updated.length === 0) throw notFound("Webhook endpoint not found");
  return getEndpoint(deps, id);
}

/**
 * Changes an endpoint's URL, its event types, or both (checked as at registration); what is left
 * out is kept, and nothing at all changes nothing. Its deliveries and their history stay: a
 * pending one goes to the new URL at its next attempt (each attempt reads the endpoint), whatever
 * its event type. The failure streak and the disabled state are left as they are (enable is its
 * own action).
 */
export async function updateWebhookEndpoint(
  deps: Deps,
  { endpointId: id, ...input }: { endpointId: string; url?: string; eventTypes?: WebhookEventType[] },
) {
  const set = {
    ...(input.url === undefined ? {} : { url: acceptedUrl(deps, input.url) }),
    ...(input.eventTypes === undefined ? {} : { eventTypes: [...new Set(input.eventTypes)] }),
  };
  if (Object.keys(set).length > 0) {
    const updated = await deps.db
      .update(webhookEndpoints)
      .set(set)
      .where(eq(webhookEndpoints.id, id))
      .returning({ id: webhookEndpoints.id });
    if (updated.length === 0) throw notFound("Webhook endpoint not found");
  }
  return getEndpoint(deps, id);
}

/**
 * A new signing secret, returned here and never again. The one it replaces goes on signing beside
 * it for SECRET_OVERLAP_MS (a day), so receivers switch when they are ready; a second rotation
 * within that day replaces it (the secret before stops signing at once) and the day starts again.
 */
export async function rotateWebhookSecret(deps: Deps, { endpointId: id }: { endpointId: string }) {
  const secret = newWebhookSecret();
  const until = new Date(deps.clock.now().getTime() + SECRET_OVERLAP_MS);
  const updated = await deps.db
    .update(webhookEndpoints)
    // Every right-hand side reads the row as it was: the previous secret is the one replaced.
    .set({ secret, previousSecret: sql`${webhookEndpoints.secret}`, previousSecretExpiresAt: until })
    .where(eq(webhookEndpoints.id, id))
    .returning({ id: webhookEndpoints.id });
  if (updated.length === 0) throw notFound("Webhook endpoint not found");
  return { secret, previousSecretExpiresAt: until.toISOString(), endpoint: await getEndpoint(deps, id) };
}

export interface WebhookDeliveryRecord {
  id: string;
  endpointId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: string | null;
  retryUntil: string;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
  payload: Record<string, unknown>;
  /** The latest attempts, newest first (at most 20). */
  attemptLog: { at: string; statusCode: number | null; error: string | null; durationMs: number }[];
}

/** A delivery as `deliverySelect` reads it. */
const DeliveryRow = z.object({
  id: z.string(),
  endpoint_id: z.string(),
  event_type: z.string(),
  status: z.enum(DELIVERY_STATUSES),
  attempts: dbInt,
  next_attempt_at: dbTimestamp,
  retry_until: dbTimestampSet,
  last_status_code: dbInt.nullable(),
  last_error: z.string().nullable(),
  created_at: dbTimestampSet,
  updated_at: dbTimestampSet,
  payload: dbJson(z.record(z.string(), z.unknown())),
  attempt_log: dbJson(
    z
      .array(
        z.object({
          at: z.string(),
          statusCode: z.number().nullable(),
          error: z.string().nullable(),
          durationMs: z.number(),
        }),
      )
      .nullable(),
  ),
});
type DeliveryRow = z.output<typeof DeliveryRow>;

function deliveryRecord(r: DeliveryRow): WebhookDeliveryRecord {
  return {
    id: r.id,
    endpointId: r.endpoint_id,
    eventType: r.event_type,
    status: r.status,
    attempts: r.attempts,
    nextAttemptAt: toIso(r.next_attempt_at),
    retryUntil: toIso(r.retry_until) as string,
    lastStatusCode: r.last_status_code,
    lastError: r.last_error,
    createdAt: toIso(r.created_at) as string,
    updatedAt: toIso(r.updated_at) as string,
    payload: r.payload,
    attemptLog: (r.attempt_log ?? []).map((a) => ({ ...a, at: toIso(a.at) as string })),
  };
}

const deliverySelect = sql`
  SELECT d.id, d.endpoint_id, d.event_type, d.status, d.attempts, d.next_attempt_at, d.retry_until, d.last_status_code,
    d.last_error, d.created_at, d.updated_at, d.payload,
    (SELECT json_agg(json_build_object('at', a.attempted_at, 'statusCode', a.status_code, 'error', a.error,
        'durationMs', a.duration_ms) ORDER BY a.attempted_at DESC, a.id DESC)
       FROM (SELECT * FROM ${webhookAttempts} a WHERE a.delivery_id = d.id ORDER BY a.attempted_at DESC, a.id DESC LIMIT 20) a
    ) AS attempt_log
  FROM ${webhookDeliveries} d`;

/** An endpoint's deliveries, newest first, each with its latest attempts. */
export async function listWebhookDeliveries(
  deps: Deps,
  { endpointId, ...page }: { endpointId: string; limit: number; offset: number; status?: string },
) {
  const status = page.status ? sql`AND d.status = ${page.status}` : sql``;
  const [rows, [count], [endpoint]] = await Promise.all([
    deps.db.execute(sql`${deliverySelect} WHERE d.endpoint_id = ${endpointId} ${status}
      ORDER BY d.created_at DESC, d.id DESC LIMIT ${page.limit} OFFSET ${page.offset}`),
    deps.db
      .execute(sql`SELECT count(*) AS total FROM ${webhookDeliveries} d WHERE d.endpoint_id = ${endpointId} ${status}`)
      .then((r) => parsedRowsOf(z.object({ total: dbInt }), r)),
    deps.db
      .execute(sql`SELECT id FROM ${webhookEndpoints} WHERE id = ${endpointId}`)
      .then((r) => parsedRowsOf(z.object({ id: z.string() }), r)),
  ]);
  if (!endpoint) throw notFound("Webhook endpoint not found");
  return { deliveries: parsedRowsOf(DeliveryRow, rows).map(deliveryRecord), total: count?.total ?? 0 };
}

/**
 * Sends a delivery again (the same `webhook-id`, so a receiver that already has it can tell):
 * back to pending with a new day of retries, its job due now, or, while an attempt is in flight,
 * as soon as that attempt ends (not beside it). One statement. A delivery of a disabled endpoint
 * is a 409 (enable the endpoint first).
 */
export async function replayWebhookDelivery(deps: Deps, { deliveryId }: { deliveryId: string }) {
  const now = deps.clock.now().toISOString();
  const [row] = parsedRowsOf(
    z.object({ id: z.string().nullable(), disabled: z.boolean().nullable(), webhook_jobs: z.unknown() }),
    await deps.db.execute(sql`
      WITH target AS (
        SELECT d.id, d.project_id, ep.disabled_at IS NOT NULL AS disabled
        FROM ${webhookDeliveries} d JOIN ${webhookEndpoints} ep ON ep.id = d.endpoint_id WHERE d.id = ${deliveryId}
      ), upd AS (
        UPDATE ${webhookDeliveries} SET status = 'pending', next_attempt_at = ${now}::timestamptz,
          retry_until = ${now}::timestamptz + make_interval(secs => ${WEBHOOK_RETRY_WINDOW_MS / 1000}),
          updated_at = ${now}::timestamptz
        WHERE id = (SELECT id FROM target WHERE NOT disabled)
        RETURNING id, project_id
      ), wh_j AS (${webhookJobsSql(sql`FROM upd u`, sql`u`, now, "replaceOrRearm")})
      SELECT (SELECT id FROM target) AS id, (SELECT disabled FROM target) AS disabled,
        ${webhookJobsColumn} AS webhook_jobs`),
  );
  if (!row?.id) throw notFound("Webhook delivery not found");
  if (row.disabled) throw conflict("The endpoint is disabled: enable it before replaying its deliveries");
  ringWebhookJobs(deps, row.webhook_jobs);
  const [delivery] = parsedRowsOf(
    DeliveryRow,
    await deps.db.execute(sql`${deliverySelect} WHERE d.id = ${deliveryId}`),
  );
  return deliveryRecord(delivery);
}

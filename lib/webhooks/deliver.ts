import { type SQL, sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { z } from "zod";
import { dbInt, dbTimestamp, jsonOf, parsedRowsOf, toDate } from "../db/rows";
import { webhookAttempts, webhookDeliveries, webhookEndpoints } from "../db/schema";
import type { Deps } from "../deps";
import { newIdSql } from "../ids";
import { WEBHOOK_RETRY_WINDOW_MS } from "./events";
import { checkResolvedAddresses, checkWebhookUrl, parseIp, type UrlPolicy } from "./url";

const BACKOFF_BASE_MS = 30_000;
const BACKOFF_MAX_MS = 4 * 60 * 60 * 1000;
/** An endpoint whose attempts all failed for this long is disabled. */
export const DISABLE_AFTER_MS = WEBHOOK_RETRY_WINDOW_MS;

/**
 * A failure streak with no failed attempt for this long is over: longer than any wait between a
 * failing delivery's attempts (BACKOFF_MAX_MS), with room for a late run. Without it a streak
 * that ended without a success (its deliveries erased with their dataset, or failed for good
 * after a late start) stayed open, and one failed attempt days later disabled the endpoint.
 */
export const STREAK_GAP_MS = BACKOFF_MAX_MS + 2 * 60 * 60 * 1000;

/**
 * The start of an endpoint's current failure streak as of `at`, over the webhook_endpoints row
 * `ep` (its alias, or none): null when there is none, or when its last failure is STREAK_GAP_MS old.
 */
export function openStreakSql(at: string, ep = ""): SQL {
  const column = (name: string) => sql.raw(ep ? `${ep}.${name}` : name);
  return sql`CASE WHEN ${column("last_failed_at")} >= ${at}::timestamptz - make_interval(secs => ${STREAK_GAP_MS / 1000})
    THEN ${column("failing_since")} END`;
}
const MAX_ERROR_LENGTH = 500;

/**
 * When to try again after `attempts` failed attempts: 30 s, 1 min, 2 min, ... doubling up to 4 h,
 * the last one at `retryUntil`; null once `retryUntil` has come (the delivery has failed).
 */
export function nextAttemptAt(attempts: number, now: Date, retryUntil: Date): Date | null {
  if (now.getTime() >= retryUntil.getTime()) return null;
  const delay = Math.min(BACKOFF_BASE_MS * 2 ** Math.min(Math.max(attempts - 1, 0), 20), BACKOFF_MAX_MS);
  return new Date(Math.min(now.getTime() + delay, retryUntil.getTime()));
}

/** How long the secret a rotation replaced goes on signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 60 * 60 * 1000;

/** An endpoint's secrets as the delivery reads them. */
export interface EndpointSecrets {
  secret: string;
  /** The secret the last rotation replaced, and when it stops signing (null: never rotated). */
  previousSecret: string | null;
  previousSecretExpiresAt: Date | null;
}

/**
 * The secrets that sign an attempt made at `at`: the current one, and the one the last rotation
 * replaced until its day is over (a receiver still on it verifies; one already on the new one too).
 */
export function signingSecrets(endpoint: EndpointSecrets, at: Date): string[] {
  const { secret, previousSecret, previousSecretExpiresAt: until } = endpoint;
  return previousSecret && until && at.getTime() < until.getTime() ? [secret, previousSecret] : [secret];
}

/**
 * The Standard Webhooks headers of one attempt: HMAC-SHA256 over `id.timestamp.body` with each
 * secret, the signatures space-separated in `webhook-signature` (a receiver accepts any one that
 * matches its secret).
 */
export function signedHeaders(secrets: string[], id: string, at: Date, body: string): Record<string, string> {
  return {
    "content-type": "application/json",
    "user-agent": "memory-service-webhooks/1",
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": secrets.map((secret) => new Webhook(secret).sign(id, at, body)).join(" "),
  };
}

/** A new endpoint secret: `whsec_` + base64 of 24 random bytes (the Standard Webhooks form). */
export function newWebhookSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

/** True on Cloudflare Workers, where the name's addresses cannot be looked up before the fetch. */
const onWorkers = () =>
  (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";

/**
 * Node.js: every address the name resolves to must be public (SSRF). The fetch then resolves the
 * name again, so a name that answers differently between the two (DNS rebinding) is not caught.
 * The edge cannot resolve names: only the literal is checked there (a Worker's fetch leaves
 * through Cloudflare's network, not the host's private network).
 */
async function checkResolved(hostname: string, policy: UrlPolicy): Promise<string | null> {
  if (parseIp(hostname) || onWorkers()) return null;
  try {
    const dns = await import("node:dns/promises");
    const found = await dns.lookup(hostname, { all: true, verbatim: true });
    return checkResolvedAddresses(
      hostname,
      found.map((a) => a.address),
      policy,
    );
  } catch (err) {
    return `The host ${hostname} did not resolve (${err instanceof Error ? err.message : String(err)})`;
  }
}

export interface AttemptResult {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * One attempt: the URL policy, then a POST signed with the endpoint's secrets of the moment, with
 * no redirects followed and a timeout.
 */
export async function attemptDelivery(
  deps: Deps,
  endpoint: { url: string } & EndpointSecrets,
  id: string,
  body: string,
): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const policy = { allowHttp: deps.config.webhooks.allowHttp };
  const decision = checkWebhookUrl(endpoint.url, policy);
  const refusal = decision.ok ? await checkResolved(decision.hostname, policy) : decision.reason;
  if (refusal) return { statusCode: null, error: `Refused: ${refusal}`, durationMs: elapsed() };
  const timeoutMs = deps.config.webhooks.timeoutMs;
  try {
    const at = deps.clock.now();
    const res = await fetch(endpoint.url, {
      method: "POST",
      headers: signedHeaders(signingSecrets(endpoint, at), id, at, body),
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel().catch(() => {});
    if (res.status >= 200 && res.status < 300) return { statusCode: res.status, error: null, durationMs: elapsed() };
    const error =
      res.status >= 300 && res.status < 400
        ? `Redirect (${res.status}) not followed${res.headers.get("location") ? ` to ${res.headers.get("location")}` : ""}`
        : `HTTP ${res.status}`;
    return { statusCode: res.status, error: error.slice(0, MAX_ERROR_LENGTH), durationMs: elapsed() };
  } catch (err) {
    const name = err instanceof Error ? err.name : "";
    const error =
      name === "TimeoutError" || name === "AbortError"
        ? `Timed out after ${timeoutMs} ms`
        : `Network error: ${err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err)}`;
    return { statusCode: null, error: error.slice(0, MAX_ERROR_LENGTH), durationMs: elapsed() };
  }
}

/**
 * How soon after its event a delivery's first attempt must start for the delivery's failed day
 * to count as the endpoint's (a doorbell runs it at once; a sweep within minutes).
 */
export const FIRST_ATTEMPT_LAG_MS = 5 * 60_000;

/** A delivery as its job reads it, with its endpoint. */
const DeliveryToAttempt = z.object({
  id: z.string(),
  status: z.string(),
  payload: z.union([z.record(z.string(), z.unknown()), z.string()]),
  attempts: dbInt,
  retry_until: dbTimestamp,
  endpoint_id: z.string(),
  url: z.string(),
  secret: z.string(),
  previous_secret: z.string().nullable(),
  previous_secret_expires_at: dbTimestamp,
  disabled_at: dbTimestamp,
});

export type AttemptOutcome = ReturnType<typeof attemptOutcome>;

/**
 * What an attempt finished at `done` decides: when to try again (null: succeeded, or the retry
 * window is over), and the cut-off and reason that disable an endpoint failing for a day.
 */
export function attemptOutcome(result: AttemptResult, priorAttempts: number, done: Date, retryUntil: Date) {
  const ok = result.error === null;
  return {
    ok,
    next: ok ? null : nextAttemptAt(priorAttempts + 1, done, retryUntil),
    at: done.toISOString(),
    disableBefore: new Date(done.getTime() - DISABLE_AFTER_MS).toISOString(),
    reason: `Every attempt failed for a day; the last: ${result.error ?? ""}`.slice(0, MAX_ERROR_LENGTH),
  };
}

/** The attempt, the endpoint's failure streak and the delivery's new state, in one statement. */
function recordAttemptSql(deliveryId: string, endpointId: string, result: AttemptResult, outcome: AttemptOutcome) {
  const { ok, next, at, disableBefore, reason } = outcome;
  // The streak this failure belongs to: the open one, or a new one from this attempt.
  const streak = sql`coalesce(${openStreakSql(at)}, ${at}::timestamptz)`;
  // A day of failures: the streak is a day old, or this delivery failed for good (its day is
  // over) with the streak running since its first attempt, which started soon after the event.
  // The second catches the day measured from the end of a slow first attempt, which the last
  // attempt, at the window's end, never reaches; a first attempt that came late (the service was
  // down) leaves only the window's tail, which is no day of failures.
  const disable = sql`NOT ${ok}::boolean AND (${streak} <= ${disableBefore}::timestamptz
    OR (${next === null}::boolean AND EXISTS (
      SELECT 1 FROM (
        SELECT attempted_at, duration_ms FROM ${webhookAttempts} WHERE delivery_id = ${deliveryId}
        ORDER BY attempted_at LIMIT 1) first
      JOIN ${webhookDeliveries} d ON d.id = ${deliveryId}
      WHERE ${streak} <= first.attempted_at
        AND first.attempted_at - make_interval(secs => coalesce(first.duration_ms, 0) / 1000.0)
          <= d.created_at + make_interval(secs => ${FIRST_ATTEMPT_LAG_MS / 1000}))))`;
  return sql`
      WITH a AS (
        INSERT INTO ${webhookAttempts} (id, delivery_id, attempted_at, status_code, error, duration_ms)
        SELECT ${newIdSql("wha")}, ${deliveryId}, ${at}::timestamptz,
          ${result.statusCode}::int, ${result.error}::text, ${result.durationMs}::int
        -- Deleted during the attempt (its dataset erased, its endpoint deleted): nothing to record.
        WHERE EXISTS (SELECT 1 FROM ${webhookDeliveries} WHERE id = ${deliveryId})
        RETURNING 1
      ), ep AS (
        UPDATE ${webhookEndpoints} SET
          failing_since = CASE WHEN ${ok}::boolean THEN NULL ELSE ${streak} END,
          last_failed_at = CASE WHEN ${ok}::boolean THEN NULL ELSE greatest(last_failed_at, ${at}::timestamptz) END,
          disabled_at = CASE WHEN ${disable} THEN ${at}::timestamptz ELSE disabled_at END,
          disabled_reason = CASE WHEN ${disable} THEN ${reason} ELSE disabled_reason END
        WHERE id = ${endpointId} AND EXISTS (SELECT 1 FROM a)
        RETURNING disabled_at IS NOT NULL AS disabled
      )
      UPDATE ${webhookDeliveries} SET attempts = attempts + 1, last_status_code = ${result.statusCode},
        last_error = ${result.error}, updated_at = ${at}::timestamptz,
        status = CASE WHEN ${ok}::boolean THEN 'succeeded'
          WHEN ${next === null}::boolean OR coalesce((SELECT disabled FROM ep), true) THEN 'failed' ELSE 'pending' END,
        next_attempt_at = CASE WHEN ${ok}::boolean OR coalesce((SELECT disabled FROM ep), true) THEN NULL
          ELSE ${next?.toISOString() ?? null}::timestamptz END
      WHERE id = ${deliveryId} AND status = 'pending' AND (SELECT count(*) FROM a) = 1
      RETURNING status, next_attempt_at`;
}

/**
 * The `webhook` job: one attempt of one delivery, recorded (status, error, duration) with the
 * delivery's and the endpoint's new state in one statement. Returns when to try again and why
 * (the failed attempt's error), or null when the delivery is done (succeeded, failed for good, its
 * endpoint disabled or deleted).
 * A success clears the endpoint's failure streak; a failure while the streak is a day old
 * disables the endpoint with the reason. The endpoint's URL and secrets are read with the
 * delivery at every attempt, so an edit or a rotation applies from the next one on.
 */
export async function deliverWebhook(deps: Deps, deliveryId: string): Promise<{ retryAt: Date; error: string } | null> {
  const [row] = parsedRowsOf(
    DeliveryToAttempt,
    await deps.db.execute(sql`
      SELECT d.id, d.status, d.payload, d.attempts, d.retry_until, ep.id AS endpoint_id, ep.url, ep.secret,
        ep.previous_secret, ep.previous_secret_expires_at, ep.disabled_at
      FROM ${webhookDeliveries} d JOIN ${webhookEndpoints} ep ON ep.id = d.endpoint_id
      WHERE d.id = ${deliveryId}`),
  );
  if (row?.status !== "pending") return null;
  const now = deps.clock.now();
  if (row.disabled_at) {
    await deps.db.execute(sql`
      UPDATE ${webhookDeliveries} SET status = 'failed', next_attempt_at = NULL, updated_at = ${now.toISOString()}::timestamptz,
        last_error = coalesce(last_error, 'The endpoint is disabled')
      WHERE id = ${deliveryId} AND status = 'pending'`);
    return null;
  }
  const body = JSON.stringify(jsonOf(row.payload));
  const endpoint = {
    url: row.url,
    secret: row.secret,
    previousSecret: row.previous_secret,
    previousSecretExpiresAt: toDate(row.previous_secret_expires_at),
  };
  const result = await attemptDelivery(deps, endpoint, row.id, body);
  const outcome = attemptOutcome(result, row.attempts, deps.clock.now(), toDate(row.retry_until) as Date);
  const { ok, next } = outcome;
  const [written] = parsedRowsOf(
    z.object({ status: z.string(), next_attempt_at: dbTimestamp }),
    await deps.db.execute(recordAttemptSql(deliveryId, row.endpoint_id, result, outcome)),
  );
  if (!ok) deps.log.info("webhook attempt failed", { deliveryId, error: result.error, next: next?.toISOString() });
  if (written?.status !== "pending") return null;
  return { retryAt: toDate(written.next_attempt_at) as Date, error: result.error ?? "The attempt failed" };
}

import { sql } from "drizzle-orm";
import { countDeleted, drainInBatches } from "../db/batches";
import { webhookDeliveries } from "../db/schema";
import type { Deps } from "../deps";

const DAY_MS = 86_400_000;

/**
 * The retention cut-off: a finished delivery (succeeded, or failed for good) whose last retry
 * window closed before it is deleted, with its attempts. The window closes a day after the event
 * or after its last replay, so a delivery stays replayable from the dashboard for `retentionDays`
 * after it could last have been sent. `null`: kept for ever (WEBHOOK_RETENTION_DAYS=0).
 */
export function deliveryRetentionCutoff(now: Date, retentionDays: number): Date | null {
  return retentionDays > 0 ? new Date(now.getTime() - retentionDays * DAY_MS) : null;
}

/** One bounded DELETE of finished deliveries past the cut-off, oldest first; their attempts cascade. */
export async function deleteExpiredDeliveries(deps: Pick<Deps, "db">, cutoff: Date, limit: number): Promise<number> {
  return countDeleted(
    deps.db,
    // MATERIALIZED, as claimJobs' (lib/jobs/store.ts): a rescanned locking subquery goes past its limit.
    sql`WITH expired AS MATERIALIZED (
        SELECT id FROM ${webhookDeliveries}
        WHERE status <> 'pending' AND retry_until < ${cutoff.toISOString()}::timestamptz
        ORDER BY retry_until LIMIT ${limit} FOR UPDATE SKIP LOCKED
      )
      DELETE FROM ${webhookDeliveries} d WHERE d.id IN (SELECT id FROM expired)`,
  );
}

/** Deliveries carry their payload and attempts: smaller batches than keys', up to 20,000 a sweep. */
export const EXPIRED_DELIVERY_BATCHES = { batch: 1000, batches: 20 };

/**
 * The sweep's step: finished deliveries past WEBHOOK_RETENTION_DAYS, `batch` at a time. Without it
 * every event's delivery and every attempt stayed for good (a busy project sends one per episode
 * and per extraction).
 */
export function deleteExpiredDeliveryBacklog(
  deps: Pick<Deps, "db" | "clock" | "config">,
  limits: { batch: number; batches: number },
): Promise<number> {
  const cutoff = deliveryRetentionCutoff(deps.clock.now(), deps.config.webhooks.retentionDays);
  if (!cutoff) return Promise.resolve(0);
  return drainInBatches((limit) => deleteExpiredDeliveries(deps, cutoff, limit), limits);
}

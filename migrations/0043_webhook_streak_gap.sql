ALTER TABLE "webhook_endpoints" ADD COLUMN "last_failed_at" timestamp with time zone;--> statement-breakpoint
-- An open streak's last failure, from its endpoint's attempts (lib/webhooks/deliver.ts,
-- STREAK_GAP_MS): a streak whose failures stopped long ago is over at its next attempt.
UPDATE "webhook_endpoints" ep SET "last_failed_at" = coalesce((
  SELECT max(a.attempted_at) FROM "webhook_attempts" a JOIN "webhook_deliveries" d ON d.id = a.delivery_id
  WHERE d.endpoint_id = ep.id AND a.error IS NOT NULL), ep.failing_since)
WHERE ep.failing_since IS NOT NULL;

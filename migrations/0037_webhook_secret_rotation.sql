-- A webhook endpoint's secret can be rotated (POST /dashboard/webhooks/:id/rotate-secret): the
-- secret it replaces is kept with the time it stops signing, a day later. Until then every attempt
-- carries a signature by each secret. Existing endpoints have no previous secret (both null).
ALTER TABLE "webhook_endpoints" ADD COLUMN "previous_secret" text;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD COLUMN "previous_secret_expires_at" timestamp with time zone;

-- A keyed request that wrote before it could fail (chat stores the user's message before its
-- model call) records it: a request taking over its claim after the holder died answers the
-- holder's kept 5xx instead of storing the message again.
ALTER TABLE "idempotency_keys" ADD COLUMN "wrote_at" timestamp with time zone;
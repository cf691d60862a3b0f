ALTER TABLE "facts" ADD COLUMN "forgotten_at" timestamp with time zone;--> statement-breakpoint
-- Facts deleted through the API before this migration: a supersession always sets valid_until,
-- a delete left it as it was, so an invalidated fact without one was deleted. (One deleted with a
-- stated end cannot be told from a superseded one and stays as before.)
UPDATE "facts" SET "forgotten_at" = "invalid_at" WHERE "invalid_at" IS NOT NULL AND "valid_until" IS NULL;

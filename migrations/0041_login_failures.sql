-- Failed dashboard sign-ins per username, for the throttle of POST /auth/login (lib/login-throttle.ts):
-- in the database so that it holds across processes, restarts and Workers isolates.
CREATE TABLE "login_failures" (
	"username" text PRIMARY KEY NOT NULL,
	"failures" integer NOT NULL,
	"last_failure_at" timestamp with time zone NOT NULL
);

import { createMiddleware } from "hono/factory";
import { authenticateApiKey, authenticateSession } from "../lib/auth";
import type { AppEnv } from "./env";

/*
 * Both checks run first of all, from `authenticateFirst` (functions/auth-first.ts), for the route
 * that declares them; where the route's own chain reaches them again, the principal is already
 * there and the credential is not looked up twice.
 */

/** `/v1/*`: an API key, resolved to its project on every request. */
export const requireApiKey = createMiddleware<AppEnv>(async function requireApiKey(c, next) {
  if (!c.get("apiKey")) c.set("apiKey", await authenticateApiKey(c.get("deps"), c.req.header("authorization")));
  await next();
});

/** `/dashboard/*` and `/auth/me|logout`: a session token. */
export const requireSession = createMiddleware<AppEnv>(async function requireSession(c, next) {
  if (!c.get("session")) c.set("session", await authenticateSession(c.get("deps"), c.req.header("authorization")));
  await next();
});

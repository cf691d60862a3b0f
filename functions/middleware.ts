import { createMiddleware } from "hono/factory";
import { authenticateApiKey, authenticateSession } from "../lib/auth";
import type { AppEnv } from "./env";

/** `/v1/*`: an API key, resolved to its project on every request. */
export const requireApiKey = createMiddleware<AppEnv>(async function requireApiKey(c, next) {
  c.set("apiKey", await authenticateApiKey(c.get("deps"), c.req.header("authorization")));
  await next();
});

/** `/dashboard/*` and `/auth/me|logout`: a session token. */
export const requireSession = createMiddleware<AppEnv>(async function requireSession(c, next) {
  c.set("session", await authenticateSession(c.get("deps"), c.req.header("authorization")));
  await next();
});

import type { Context, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import { matchedRoutes } from "hono/route";
import type { AppEnv } from "./env";
import { notFoundRoute } from "./errors";
import { original } from "./failures";
import { requireApiKey, requireSession } from "./middleware";

/** The credential checks a route declares, sub-app wide (`use("*", …)`) or per route (`middleware`). */
const CREDENTIAL_CHECKS: ReadonlySet<MiddlewareHandler<AppEnv>> = new Set([requireApiKey, requireSession]);

/**
 * What the router found for this method and path: whether any endpoint answers it, and the
 * credential check the endpoint's chain would run before it (null for a public route). Read from
 * the match itself, so every route, documented or not, is covered by what it declares.
 *
 * Middleware is registered with the method ALL; an endpoint (and its own per-route middleware,
 * validators and handler) with its method. Credential checks after the first endpoint entry
 * would never run (that endpoint answers first), so the walk stops there.
 */
export function routeGuard(c: Context<AppEnv>): { endpoint: boolean; check: MiddlewareHandler<AppEnv> | null } {
  let check: MiddlewareHandler<AppEnv> | null = null;
  for (const route of matchedRoutes(c)) {
    const handler = original(route.handler);
    if (CREDENTIAL_CHECKS.has(handler as MiddlewareHandler<AppEnv>)) {
      check ??= handler as MiddlewareHandler<AppEnv>;
      continue;
    }
    if (route.method !== "ALL") return { endpoint: true, check };
  }
  return { endpoint: false, check: null };
}

/**
 * A method and path no endpoint answers is 404 for everyone, before anything else runs: no
 * credential is looked up for it (the route table is public anyway, at /openapi.json).
 */
export const unknownRouteIsNotFound = createMiddleware<AppEnv>(async function unknownRouteIsNotFound(c, next) {
  if (!routeGuard(c).endpoint) return notFoundRoute(c);
  await next();
});

/**
 * Authentication first: the route's own credential check runs here, ahead of every other check
 * (NUL characters in the path or query, the body limit, validation, lookups), so a request
 * without a valid credential learns nothing but its 401. The check records the principal, and
 * when the route's chain reaches the same check again it does not repeat it.
 */
export const authenticateFirst = createMiddleware<AppEnv>(async function authenticateFirst(c, next) {
  const { check } = routeGuard(c);
  if (check) return check(c, next);
  await next();
});

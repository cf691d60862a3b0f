import type { RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import { matchedRoutes } from "hono/route";
import { FAILURE_MESSAGE } from "./schemas/errors";

/** Each endpoint handler whose route declares its 500 message (`failureResponse`), with that message. */
const declared = new WeakMap<object, string>();

/** Hono marks a sub-app handler it had to wrap (a sub-app with its own onError) with the original. */
export const original = (handler: unknown): unknown =>
  (handler as { __COMPOSED_HANDLER?: unknown }).__COMPOSED_HANDLER ?? handler;

/** Records the 500 message `route` declares, if any, for its handler (called as the route is registered). */
export function declareFailure(route: RouteConfig, handler: object): void {
  const response = route.responses[500] as { [FAILURE_MESSAGE]?: string } | undefined;
  const message = response?.[FAILURE_MESSAGE];
  if (message !== undefined) declared.set(handler, message);
}

/**
 * The 500 message the matched endpoint declares, read from the router's match, so a failure in
 * middleware before the endpoint runs gets it too. The endpoint is the first entry with a method
 * (middleware has ALL); its chain (per-route middleware, validators, handler) ends with the handler.
 */
export function declaredFailure(c: Context): string | undefined {
  const routes = matchedRoutes(c);
  const start = routes.findIndex((r) => r.method !== "ALL");
  if (start < 0) return undefined;
  let end = start;
  while (
    end + 1 < routes.length &&
    routes[end + 1].method === routes[start].method &&
    routes[end + 1].path === routes[start].path
  )
    end++;
  return declared.get(original(routes[end].handler) as object);
}

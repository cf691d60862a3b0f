import type { Context, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import { matchedRoutes } from "hono/route";
import type { Deps } from "../lib/deps";
import { consoleLogger, type Logger } from "../lib/log";
import type { AppEnv } from "./env";

/** An unmatched path is logged as sent, cut to this length (it is whatever a client typed). */
const MAX_PATH = 200;

/**
 * One `request` line at info per request, on both hosts, once the response is ready: method, the
 * route's path template (`/v1/threads/:threadId`, never the ids in it), status, duration, and who
 * made it (the API key's project, the session's user). Nothing from the body, the query string or
 * the headers. The stack of an unexpected error is logged once, by `onError`, not here.
 *
 * Registered first, so redirects, static files, unknown routes and CORS preflights are logged too.
 * The logger is the request's deps' (the host's LOG_LEVEL); a request that was answered before the
 * deps were injected asks the host for them.
 */
export function requestLog(deps: (c: Context<AppEnv>) => Deps | Promise<Deps>): MiddlewareHandler<AppEnv> {
  return createMiddleware<AppEnv>(async function requestLog(c, next) {
    const started = performance.now();
    let status: number | undefined;
    try {
      await next();
      status = c.res.status;
    } finally {
      // Hono hands thrown errors to onError, so next() throws only if that fails: still one line.
      const log = await loggerOf(c, deps);
      log.info("request", requestFields(c, status ?? 500, performance.now() - started));
    }
  });
}

async function loggerOf(c: Context<AppEnv>, deps: (c: Context<AppEnv>) => Deps | Promise<Deps>): Promise<Logger> {
  const injected = c.get("deps");
  if (injected) return injected.log;
  try {
    return (await deps(c)).log;
  } catch {
    return consoleLogger; // the host cannot make its deps (the Worker without DATABASE_URL)
  }
}

/** The fields of a request line (exported for the tests). */
export function requestFields(c: Context<AppEnv>, status: number, ms: number): Record<string, unknown> {
  const route = routeTemplate(c);
  const fields: Record<string, unknown> = {
    method: c.req.method,
    route,
    status,
    durationMs: Math.round(ms * 10) / 10,
  };
  if (route === null) fields.path = c.req.path.slice(0, MAX_PATH);
  const projectId = c.get("apiKey")?.projectId;
  if (projectId) fields.projectId = projectId;
  const userId = c.get("session")?.userId;
  if (userId) fields.userId = userId;
  return fields;
}

/**
 * The path template of the endpoint that matched: middleware is registered with the method ALL,
 * endpoints with theirs, so the first route with a method is the endpoint (as functions/auth-first.ts
 * reads it). Null when no endpoint matched (an unknown route, a CORS preflight).
 */
export function routeTemplate(c: Context<AppEnv>): string | null {
  for (const route of matchedRoutes(c)) if (route.method !== "ALL") return route.path;
  return null;
}

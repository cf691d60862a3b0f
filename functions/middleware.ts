import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { matchedRoutes } from "hono/route";
import { authenticateApiKey, authenticateSession, deferApiKey } from "../lib/auth";
import type { Deps } from "../lib/deps";
import type { Llm } from "../lib/llm/client";
import type { AppEnv } from "./env";
import { original } from "./failures";

/*
 * Both checks run first of all, from `authenticateFirst` (functions/auth-first.ts), for the route
 * that declares them; where the route's own chain reaches them again, the principal is already
 * there and the credential is not looked up twice.
 */

/**
 * `/v1/*`: an API key, resolved to its project on every request. A write checks it first, in a
 * statement of its own (the write then knows its project). A read (GET, or a POST route that
 * declares `readsOnly`) checks it in its own first round trip instead (`deferApiKey`): its work is
 * scoped by the key in SQL, and the key's answer (a 401) is decided before the work's result is
 * used. Over Neon's HTTP driver a read is then one round trip instead of two; so is a recall
 * whose query must be embedded, when its key was accepted lately (lib/accepted-keys.ts).
 */
export const requireApiKey = createMiddleware<AppEnv>(async function requireApiKey(c, next) {
  if (c.get("apiKey") || c.get("projectScope")) return next();
  if (!isRead(c)) {
    c.set("apiKey", await authenticateApiKey(c.get("deps"), c.req.header("authorization")));
    return next();
  }
  const deps = c.get("deps");
  const key = deferApiKey(deps, c.req.header("authorization"));
  const principal = () => key.principal().then((p) => c.set("apiKey", p));
  c.set("deps", {
    ...deps,
    db: key.database.db,
    database: key.database,
    // The key is checked before the provider is paid for anything (recall's query embedding),
    // unless this process accepted it lately: then the check rides with the read's statement.
    llm: key.acceptedLately ? deps.llm : checkedFirst(deps.llm, principal),
  } satisfies Deps);
  c.set("projectScope", key.projectId);
  c.set("ledgerScope", key.ledgerProjectId);
  c.set("readTenant", key.tenant);
  await next();
  // Whatever the route answered (a 404, a validation error, a body read without a statement), a
  // refused key answers 401 instead: thrown here, it takes the one error path.
  await principal();
});

/** `/dashboard/*` and `/auth/me|logout`: a session token. */
export const requireSession = createMiddleware<AppEnv>(async function requireSession(c, next) {
  if (!c.get("session")) c.set("session", await authenticateSession(c.get("deps"), c.req.header("authorization")));
  await next();
});

/**
 * Declared by a POST route that only reads (recall, prepare): its API key is checked in its own
 * first round trip, as for GET. Without an effect of its own.
 */
export const readsOnly = createMiddleware<AppEnv>(async function readsOnly(_c, next) {
  await next();
});

/**
 * A read: GET, or a route declaring `readsOnly`. A request with an Idempotency-Key header is
 * treated as a write: its key's claim needs the project first (functions/idempotency.ts).
 */
function isRead(c: Context<AppEnv>): boolean {
  if (c.req.method === "GET" || c.req.method === "HEAD") return true;
  if (c.req.header("idempotency-key") !== undefined) return false;
  return matchedRoutes(c).some((route) => original(route.handler) === readsOnly);
}

/** The provider client, each call made only once `ready` has resolved (it throws a 401). */
function checkedFirst(llm: Llm, ready: () => Promise<void>): Llm {
  const after =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A) => {
      await ready();
      return call(...args);
    };
  return {
    structured: after(llm.structured.bind(llm)),
    complete: after(llm.complete.bind(llm)),
    stream: after(llm.stream.bind(llm)),
    embed: after(llm.embed.bind(llm)),
    embeddingSize: after(llm.embeddingSize.bind(llm)),
    rerank: after(llm.rerank.bind(llm)),
  };
}

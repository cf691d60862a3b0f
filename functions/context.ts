import type { Context } from "hono";
import type { ProjectContext, ReadContext } from "../lib/context";
import type { AppEnv } from "./env";

/**
 * A /v1 (or /mcp) request's context: its dependencies and the API key's project. The one place a
 * route reads the key's project, so how a request's project is resolved is decided here.
 */
export function projectContext(c: Context<AppEnv>): ProjectContext {
  return { deps: c.get("deps"), projectId: c.get("apiKey").projectId };
}

/**
 * A /v1 read's context (every GET, and the POST routes declaring `readsOnly`): its project as SQL
 * that checks the API key inside the read's own round trip, and the dependencies whose database
 * sends that check with the read's first statement (functions/middleware.ts); and, as SQL too,
 * the key's project whose ledger its provider calls go to.
 */
export function readContext(c: Context<AppEnv>): ReadContext {
  const projectId = c.get("projectScope") ?? c.get("apiKey").projectId;
  return {
    deps: c.get("deps"),
    projectId,
    ledgerProjectId: c.get("ledgerScope") ?? projectId,
    tenant: c.get("readTenant"),
  };
}

/**
 * A dashboard request's context for the project it names (a path or query parameter, or the
 * body). Only for routes behind requireSession: any signed-in user may act on any project.
 */
export function dashboardProjectContext(c: Context<AppEnv>, projectId: string): ProjectContext {
  if (!c.get("session")) throw new Error("A dashboard project context needs a session: route it behind requireSession");
  return { deps: c.get("deps"), projectId };
}

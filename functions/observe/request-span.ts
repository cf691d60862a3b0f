import type { MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import { type Attributes, withSpan } from "../../lib/telemetry";
import type { AppEnv } from "../env";
import { routeTemplate } from "../request-log";
import { type MemoryOperation, memoryOperationOf, routeParams } from "./memory-operations";

/**
 * A server span per request (OpenTelemetry's HTTP conventions: the route template, never the ids
 * in the path), a child of the caller's span when the request carries a W3C `traceparent`. A
 * /v1 route that is a memory operation gets a span of its own inside it, named and described
 * after the GenAI conventions (functions/observe/memory-operations.ts). Registered by the
 * Node.js host only when tracing is on, so a host without tracing runs none of this.
 */
export const requestSpan: MiddlewareHandler<AppEnv> = createMiddleware<AppEnv>(async function requestSpan(c, next) {
  const route = routeTemplate(c);
  const method = c.req.method;
  const name = route ? `${method} ${route}` : method;
  const attributes: Attributes = {
    "http.request.method": method,
    "http.route": route ?? undefined,
    "url.path": c.req.path,
  };
  await withSpan(name, { kind: "server", parent: c.req.header("traceparent"), attributes }, async (span) => {
    const operation = memoryOperationOf(method, route);
    if (!operation) await next();
    else {
      const params = routeParams(route ?? "", c.req.path);
      await withSpan(operation.name, { attributes: memoryAttributes(operation, params) }, async (inner) => {
        await next();
        // Known once the credential was checked (a read checks it inside its own statement).
        inner.setAttributes({ "gen_ai.memory.store.id": c.get("apiKey")?.projectId, ...failure(c.res.status) });
      });
    }
    span.setAttributes({ "http.response.status_code": c.res.status, ...failure(c.res.status) });
  });
});

/** The GenAI conventions' memory attributes; the store is the project (set once known), a thread the conversation. */
export function memoryAttributes(operation: MemoryOperation, params: Record<string, string>): Attributes {
  return {
    "gen_ai.operation.name": operation.name,
    "gen_ai.conversation.id": params.threadId,
    "gen_ai.memory.record.id": operation.recordParam ? params[operation.recordParam] : undefined,
    "gen_ai.memory.record.count": operation.recordCount,
    "memory.dataset": params.dataset,
  };
}

/** A 5xx marks the span failed (`error.type` is the status, as the HTTP conventions say); a 4xx is the client's. */
const failure = (status: number): Attributes => (status >= 500 ? { "error.type": String(status) } : {});

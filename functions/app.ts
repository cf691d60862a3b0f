import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context, Handler, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { cors } from "hono/cors";
import { createMiddleware } from "hono/factory";
import { ZodRealError } from "zod";
import type { Deps } from "../lib/deps";
import { HttpError } from "../lib/errors";
import { authRoutes } from "./auth";
import { authenticateFirst, unknownRouteIsNotFound } from "./auth-first";
import { utf8Bodies } from "./charset";
import { dashboardRoutes } from "./dashboard/routes";
import { docsRoutes, registerOpenApi } from "./docs";
import type { AppEnv } from "./env";
import { episodicRoutes } from "./episodic";
import { notFoundRoute, onError } from "./errors";
import { faviconRoute } from "./favicon";
import { healthRoutes } from "./health";
import { documentIdempotencyKeys, idempotencyKeys } from "./idempotency";
import { jobRoutes } from "./jobs";
import { mcpRoutes } from "./mcp/routes";
import { recallRoutes } from "./recall";
import { requestLog } from "./request-log";
import { createRouter } from "./router";
import { BadRequestSchema, ErrorSchema, errorResponses } from "./schemas/errors";
import { jsonResponse } from "./schemas/http";
import { semanticRoutes } from "./semantic";
import { threadRoutes } from "./threads";
import { usageRoutes } from "./usage";
import { BATCH_PATH, batchBodyLimit } from "./working/batch";
import { workingRoutes } from "./working/routes";

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The whole HTTP surface, shared by both hosts. The host supplies the dependencies per request
 * (the Node.js host returns its one set; the Worker builds a Neon client per request).
 */
export function createApp(options: {
  deps: (c: Context<AppEnv>) => Deps | Promise<Deps>;
  corsOrigins: string[];
  /** Serves the dashboard's built files (the Node.js host); the edge serves them as static assets. */
  dashboardAssets?: MiddlewareHandler<AppEnv>;
  /**
   * The Node.js host's metrics and traces (functions/observe/), when configured: its middleware
   * runs before everything else, and GET /metrics answers before the API's own middleware.
   */
  observe?: { middleware: MiddlewareHandler<AppEnv>[]; metrics?: Handler<AppEnv> };
}) {
  const app = createRouter();
  for (const middleware of options.observe?.middleware ?? []) app.use("*", middleware);
  app.use("*", requestLog(options.deps)); // first of the app's own: every request gets its one line
  // Not an API route (not in /openapi.json): its own bearer token, checked by its handler.
  if (options.observe?.metrics) app.get("/metrics", options.observe.metrics);

  // The dashboard UI lives at /dashboard/ (hash routes inside, so no page path collides with the
  // /dashboard/* API). Its files are public; only the API calls it makes carry a session.
  app.get("/", (c) => c.redirect("/dashboard/"));
  app.get("/dashboard", (c) => c.redirect("/dashboard/"));
  // The page's file by its name, as Workers static assets answer it on the edge (html_handling
  // "auto-trailing-slash" redirects both to /dashboard/): the same page on both hosts.
  app.get("/dashboard/index.html", (c) => c.redirect("/dashboard/"));
  app.get("/dashboard/index", (c) => c.redirect("/dashboard/"));
  app.get("/favicon.ico", faviconRoute);
  if (options.dashboardAssets) {
    app.get("/dashboard/", options.dashboardAssets);
    app.get("/dashboard/assets/*", options.dashboardAssets);
  }

  app.use(
    "*",
    cors({
      origin: options.corsOrigins,
      // Mcp-Protocol-Version: what an MCP client in a browser sends to /mcp after initialize.
      allowHeaders: ["Authorization", "Content-Type", "Idempotency-Key", "Mcp-Protocol-Version"],
      exposeHeaders: ["Idempotent-Replayed"],
      allowMethods: ["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
      maxAge: 600,
    }),
  );
  // The order is the contract: an unknown method and path is 404 for everyone; on a known route
  // the credential comes first (a request without a valid one gets its 401 and nothing else);
  // then NUL characters in the path or query, the body limit, a body in another charset than
  // UTF-8 read as declared, validation and the route itself.
  app.use("*", unknownRouteIsNotFound);
  app.use(
    "*",
    createMiddleware<AppEnv>(async function injectDeps(c, next) {
      c.set("deps", await options.deps(c));
      await next();
    }),
  );
  app.use("*", authenticateFirst);
  app.use("*", rejectNul);
  const defaultBodyLimit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new HttpError(413, "Request body too large (limit 1 MB)");
    },
  });
  // The message batch routes alone take up to 5 MB (functions/working/batch.ts).
  app.use("*", (c, next) =>
    (BATCH_PATH.test(new URL(c.req.url).pathname) ? batchBodyLimit : defaultBodyLimit)(c, next),
  );
  app.use("*", utf8Bodies);
  // Last before the routes: an Idempotency-Key on a /v1 write claims, replays or refuses (409, 422).
  app.use("/v1/*", idempotencyKeys);

  app.route("/health", healthRoutes);
  app.route("/auth", authRoutes);
  app.route("/dashboard", dashboardRoutes);
  app.route("/v1/threads", threadRoutes);
  app.route("/v1/memory/working", workingRoutes);
  app.route("/v1/memory/episodic", episodicRoutes);
  app.route("/v1/memory/semantic", semanticRoutes);
  app.route("/v1/memory/recall", recallRoutes);
  app.route("/v1/usage", usageRoutes);
  app.route("/jobs", jobRoutes);
  // MCP for assistants: API key as /v1, stateless, not in the OpenAPI document (functions/mcp/routes.ts).
  app.route("/mcp", mcpRoutes);
  // The API reference; on the Node.js host also the renderer's file, from the same built assets.
  app.route("/", docsRoutes(options.dashboardAssets));
  documentIdempotencyKeys(app);
  documentMiddlewareRefusals(app);
  registerOpenApi(app);

  app.notFound(notFoundRoute);
  app.onError(onError);
  return app;
}

export type App = ReturnType<typeof createApp>;

/**
 * Postgres text cannot hold U+0000, so a percent-encoded NUL in a path parameter or a query value
 * would fail its statement with a 500. No stored name contains one: in the path it is a 404, in
 * the query string a validation error naming the parameter. (Bodies are checked by their schemas.)
 * It runs after authentication: without a valid credential the answer is the 401.
 */
const rejectNul = createMiddleware<AppEnv>(async function rejectNul(c, next) {
  const url = new URL(c.req.url);
  if (/%00/i.test(url.pathname)) return notFoundRoute(c);
  const issues = /%00/i.test(url.search)
    ? [...url.searchParams]
        .filter(([key, value]) => key.includes("\u0000") || value.includes("\u0000"))
        .map(([key, value]) => ({
          code: "custom" as const,
          path: [key],
          message: "Must not contain NUL characters (\\u0000)",
          input: value,
        }))
    : [];
  if (issues.length > 0) throw new ZodRealError(issues);
  await next();
});

/**
 * Documents what the service answers before a route's handler runs: on every route that takes a
 * body, the 1 MB limit's 413, the 415 of a body not sent as JSON (or in a charset it cannot read)
 * and the 400 of a body that is not JSON (BadRequest: `issues` only for a field); on every route
 * with path parameters, the 404 of a path holding NUL (`rejectNul`). A route's own declarations
 * are kept. Call after the routes are mounted and before the document is served.
 */
export function documentMiddlewareRefusals(app: OpenAPIHono<AppEnv>) {
  for (const def of app.openAPIRegistry.definitions) {
    if (def.type !== "route") continue;
    const { route } = def;
    const responses = { ...route.responses };
    if (route.request?.body) {
      if (responses[400] === errorResponses[400] || responses[400] === undefined) {
        responses[400] = jsonResponse(
          BadRequestSchema,
          "Validation failed (`issues` names the fields), or the body is not JSON or not in the charset its Content-Type names",
        );
      }
      responses[413] ??= jsonResponse(ErrorSchema, `Request body over ${MAX_BODY_BYTES / 1024 / 1024} MB`);
      responses[415] ??= jsonResponse(
        ErrorSchema,
        "The Content-Type is missing or not JSON, or names a charset the service cannot read",
      );
    }
    if (route.request?.params) responses[404] ??= errorResponses[404];
    route.responses = responses;
  }
}

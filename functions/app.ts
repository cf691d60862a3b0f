import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { cors } from "hono/cors";
import { createMiddleware } from "hono/factory";
import type { Deps } from "../lib/deps";
import { HttpError } from "../lib/errors";
import { authRoutes } from "./auth";
import { dashboardRoutes } from "./dashboard";
import { docsRoutes, registerOpenApi } from "./docs";
import type { AppEnv } from "./env";
import { notFoundRoute, onError } from "./errors";
import { healthRoutes } from "./health";
import { createRouter } from "./router";
import { threadRoutes } from "./threads";
import { workingRoutes } from "./working";

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The whole HTTP surface, shared by both hosts. The host supplies the dependencies per request
 * (the Node.js host returns its one set; the Worker builds a Neon client per request).
 */
export function createApp(options: { deps: (c: Context<AppEnv>) => Deps | Promise<Deps>; corsOrigins: string[] }) {
  const app = createRouter();

  app.use(
    "*",
    cors({
      origin: options.corsOrigins,
      allowHeaders: ["Authorization", "Content-Type"],
      allowMethods: ["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
      maxAge: 600,
    }),
  );
  app.use(
    "*",
    createMiddleware<AppEnv>(async function injectDeps(c, next) {
      c.set("deps", await options.deps(c));
      await next();
    }),
  );
  app.use(
    "*",
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new HttpError(413, "Request body too large (limit 1 MB)");
      },
    }),
  );

  app.route("/health", healthRoutes);
  app.route("/auth", authRoutes);
  app.route("/dashboard", dashboardRoutes);
  app.route("/v1/threads", threadRoutes);
  app.route("/v1/memory/working", workingRoutes);
  app.route("/", docsRoutes);
  registerOpenApi(app);

  app.notFound(notFoundRoute);
  app.onError(onError);
  return app;
}

export type App = ReturnType<typeof createApp>;

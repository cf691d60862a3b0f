import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serveStatic } from "@hono/node-server/serve-static";
import type { MiddlewareHandler } from "hono";
import { DOCS_ASSET_HEADERS, DOCS_ASSETS_PREFIX } from "./docs-renderer";
import type { AppEnv } from "./env";
import { notFoundRoute } from "./errors";

/**
 * Where `npm run build:ui` writes the dashboard (`dashboard/index.html` and `dashboard/assets/*`)
 * and the API reference's renderer (`docs/assets/*`, functions/docs-renderer.ts).
 */
export const DASHBOARD_DIR = fileURLToPath(new URL("../dist/ui", import.meta.url));

/**
 * Response headers of the dashboard's files, on both hosts: the Node.js host sets them here, and
 * the Vite build writes them to `dist/ui/_headers`, which Workers static assets apply on the edge.
 * The page talks only to its own origin and is never framed.
 */
export const DASHBOARD_HEADERS: Record<string, string> = {
  "Content-Security-Policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

/** Hashed file names never change content: cache them for a year; the page itself is revalidated. */
const IMMUTABLE = "public, max-age=31536000, immutable";

/**
 * The Node.js host's server for the dashboard's files and the API reference's renderer (the edge
 * serves them as static assets, before the Worker runs). A file that does not exist is a 404,
 * never the session check of the dashboard API behind it.
 */
export function dashboardAssets(dir = DASHBOARD_DIR): MiddlewareHandler<AppEnv> {
  if (!existsSync(join(dir, "dashboard", "index.html"))) {
    return async (c) =>
      c.text(
        "The dashboard and the API reference's renderer are not built: run `npm run build:ui` (npm ci does it too).",
        404,
      );
  }
  const serve = serveStatic<AppEnv>({ root: dir });
  return async (c) => {
    const served = await serve(c, async () => {});
    if (!served) return notFoundRoute(c);
    // Set on the response itself: serveStatic builds it before its onFound hook runs.
    if (c.req.path.startsWith(DOCS_ASSETS_PREFIX)) {
      for (const [name, value] of Object.entries(DOCS_ASSET_HEADERS)) served.headers.set(name, value);
      return served;
    }
    served.headers.set("Cache-Control", c.req.path.startsWith("/dashboard/assets/") ? IMMUTABLE : "no-cache");
    for (const [name, value] of Object.entries(DASHBOARD_HEADERS)) served.headers.set(name, value);
    return served;
  };
}

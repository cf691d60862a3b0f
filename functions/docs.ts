import type { OpenAPIHono } from "@hono/zod-openapi";
import { Scalar } from "@scalar/hono-api-reference";
import type { MiddlewareHandler } from "hono";
import { devDependencies, version } from "../package.json";
import { DOCS_ASSETS_PREFIX, DOCS_RENDERER_FILE } from "./docs-renderer";
import type { AppEnv } from "./env";
import { createRouter } from "./router";

/**
 * The document's tags, in the order the reference shows them: the `/v1` integration surface
 * first, then the routes the dashboard uses, then the service's own. `x-tagGroups` (read by the
 * renderer) puts each set under its own heading; a route's `tags` must name one of these (a test
 * checks that every operation's tag is listed here).
 */
export const TAG_GROUPS = [
  {
    name: "API (/v1, API key)",
    tags: [
      {
        name: "Threads",
        description:
          "A thread is one conversation of one end user (`dataset`). Create it, read it, update its tags or episodic override, end it.",
      },
      {
        name: "Working memory",
        description:
          "A thread's messages, the prepared context window (summary and recent messages), compaction, and chat.",
      },
      {
        name: "Episodic memory",
        description:
          "Episodes: summaries of finished stretches of a conversation, made in the background. List, search, read, retry.",
      },
      {
        name: "Semantic memory",
        description: "Facts about the user and the entities they mention, extracted from episodes.",
      },
      {
        name: "Recall",
        description:
          "What the service knows about a dataset as a prompt-ready block; export and erase a dataset's memory.",
      },
      {
        name: "Usage",
        description:
          "The usage ledger: every model and embedding call made for the project, with the provider's token counts, and the monthly token budget.",
      },
    ],
  },
  {
    name: "Internal (dashboard, session token)",
    tags: [
      {
        name: "Internal: auth",
        description: "Dashboard sign-in: a session token for the routes below. May change without notice.",
      },
      {
        name: "Internal: dashboard",
        description:
          "Projects, API keys, users, settings and the memory browser behind the dashboard UI. May change without notice.",
      },
    ],
  },
  {
    name: "Service",
    tags: [{ name: "Health", description: "Liveness and the database's reachability; no credential." }],
  },
] as const;

export const OPENAPI_INFO = {
  openapi: "3.1.0",
  info: {
    title: "Conversational Memory Service",
    version,
    description:
      "Memory for chat applications: threads and messages, episodes, facts and recall. `/v1/*` is the integration surface (API key, `Authorization: Bearer mk_…`); the internal routes serve the dashboard (session token from `POST /auth/login`) and may change without notice.",
  },
  tags: TAG_GROUPS.flatMap((group) => group.tags.map((tag) => ({ ...tag }))),
  "x-tagGroups": TAG_GROUPS.map((group) => ({ name: group.name, tags: group.tags.map((tag) => tag.name) })),
};

/** `GET /openapi.json`: generated from the same zod schemas that validate requests. */
export function registerOpenApi(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "API key (`mk_` + 64 hex characters) for `/v1/*`.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "session", {
    type: "http",
    scheme: "bearer",
    description: "Dashboard session token from `POST /auth/login`.",
  });
  // The origin it is served from as the server, so the reference's requests and copied curl
  // commands have a host; `npm run openapi` (scripts/openapi.ts) writes the document without one.
  app.doc31("/openapi.json", (c) => ({ ...OPENAPI_INFO, servers: [{ url: new URL(c.req.url).origin }] }));
}

/**
 * The renderer's URL. The file name is fixed (Workers static assets are looked up by path); the
 * query carries the pinned version of `@scalar/api-reference`, so an upgrade is a new URL and
 * the file itself can be cached for a year.
 */
export const DOCS_RENDERER_URL = `${DOCS_ASSETS_PREFIX}${DOCS_RENDERER_FILE}?v=${encodeURIComponent(
  devDependencies["@scalar/api-reference"],
)}`;

/**
 * The page's Content-Security-Policy. Scripts: only this origin's (the renderer) and the page's
 * one inline initialiser, by a nonce made for each response. Styles: the renderer sets inline
 * `style` attributes and injects `<style>` elements, which no nonce or hash can allow, hence
 * `'unsafe-inline'` for styles only (and no nonce in `style-src`, which would disable it). It may
 * talk only to its own origin (the document, and "Test request" calls), and is never framed.
 */
export function docsCsp(nonce: string) {
  return [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join("; ");
}

/** Scalar's configuration: everything from this origin, nothing that calls Scalar's services. */
const RENDERER_CONFIG = {
  url: "/openapi.json",
  cdn: DOCS_RENDERER_URL,
  pageTitle: "API reference · Conversational Memory Service",
  // No fonts from Scalar's font host (system fonts), no telemetry, no AI agent or MCP links, no
  // developer toolbar.
  withDefaultFonts: false,
  telemetry: false,
  agent: { disabled: true },
  mcp: { disabled: true },
  showDeveloperTools: "never",
  // Schema properties in the order the zod schemas declare them.
  orderSchemaPropertiesBy: "preserve",
  defaultOpenAllTags: true,
} as const;

function newNonce() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes));
}

/**
 * `GET /docs`: the API reference, rendered in the browser by Scalar from `/openapi.json`; on both
 * hosts the page is made here and the renderer's file is served from the built assets (the
 * Node.js host through `assets`, the edge as a Workers static asset before the Worker runs).
 */
export function docsRoutes(assets?: MiddlewareHandler<AppEnv>) {
  const router = createRouter().get("/docs", async (c, next) => {
    const nonce = newNonce();
    const res = await Scalar<AppEnv>({ ...RENDERER_CONFIG, nonce })(c, next);
    if (!res) return c.text("The API reference could not be rendered", 500);
    res.headers.set("Content-Security-Policy", docsCsp(nonce));
    res.headers.set("X-Content-Type-Options", "nosniff");
    res.headers.set("Referrer-Policy", "no-referrer");
    res.headers.set("Cache-Control", "no-store");
    return res;
  });
  if (assets) router.get(`${DOCS_ASSETS_PREFIX}*`, assets);
  return router;
}

/**
 * Where the API reference's renderer lives: Scalar's prebuilt standalone bundle
 * (`@scalar/api-reference`'s `dist/browser/standalone.js`), copied by `npm run build:ui`
 * (ui/vite.config.ts) into `dist/ui/docs/assets/`, beside the dashboard. Both hosts serve that one
 * file: the Node.js host from `dist/ui` (functions/dashboard-assets.ts), the edge as a Workers
 * static asset. No CDN: the page loads nothing from another origin.
 *
 * No imports here: ui/vite.config.ts reads these constants too.
 */
export const DOCS_ASSETS_PREFIX = "/docs/assets/";

/** The bundle's file name under `docs/assets/` (fixed; the page adds `?v=<version>` to bust caches). */
export const DOCS_RENDERER_FILE = "scalar-api-reference.js";

/** Headers of the renderer's files on both hosts (`_headers` on the edge): cached for a year. */
export const DOCS_ASSET_HEADERS: Record<string, string> = {
  "Cache-Control": "public, max-age=31536000, immutable",
  "X-Content-Type-Options": "nosniff",
};

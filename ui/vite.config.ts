import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";
import { DASHBOARD_HEADERS } from "../functions/dashboard-assets.ts";
import { DOCS_ASSET_HEADERS, DOCS_ASSETS_PREFIX, DOCS_RENDERER_FILE } from "../functions/docs-renderer.ts";

const dist = new URL("../dist/ui/", import.meta.url);

/**
 * `_headers` beside the `dashboard/` folder (the root of Workers static assets): the dashboard's
 * and the API reference renderer's response headers on the edge, from the same constants the
 * Node.js host sets them from.
 */
function workersHeaders(): Plugin {
  let outDir = "";
  return {
    name: "workers-headers",
    apply: "build",
    configResolved(config) {
      outDir = config.build.outDir;
    },
    closeBundle(error) {
      if (error) return;
      mkdirSync(dirname(outDir), { recursive: true });
      const block = (path: string, headers: Record<string, string>) =>
        `${path}\n${Object.entries(headers)
          .map(([name, value]) => `  ${name}: ${value}`)
          .join("\n")}\n`;
      writeFileSync(
        join(dirname(outDir), "_headers"),
        block("/dashboard/*", DASHBOARD_HEADERS) + block(`${DOCS_ASSETS_PREFIX}*`, DOCS_ASSET_HEADERS),
      );
    },
  };
}

/**
 * The API reference's renderer (`/docs`, functions/docs.ts): Scalar's prebuilt standalone bundle,
 * copied from its npm package to `docs/assets/` beside `dashboard/`, where both hosts serve it
 * (no CDN, nothing fetched at run time). Not bundled by Vite: it is one prebuilt file.
 */
function docsRenderer(): Plugin {
  let outDir = "";
  return {
    name: "docs-renderer",
    apply: "build",
    configResolved(config) {
      outDir = config.build.outDir;
    },
    closeBundle(error) {
      if (error) return;
      // The package's main entry is dist/index.js; the browser bundle sits beside it.
      const main = createRequire(import.meta.url).resolve("@scalar/api-reference");
      const target = join(dirname(outDir), DOCS_ASSETS_PREFIX, DOCS_RENDERER_FILE);
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(join(dirname(main), "browser", "standalone.js"), target);
    },
  };
}

/**
 * The dashboard client. Served under /dashboard/ by both hosts: Workers static assets on the edge
 * (wrangler.toml `[assets]`), the same files from `dist/ui` on the Node.js host. Preact's JSX
 * runtime through Vite's own transform: no framework plugin needed.
 */
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/dashboard/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  plugins: [workersHeaders(), docsRenderer()],
  build: {
    outDir: fileURLToPath(new URL("dashboard", dist)),
    emptyOutDir: true,
    target: "es2022",
  },
  server: { port: 5173, strictPort: true },
});

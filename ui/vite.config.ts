import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";
import { DASHBOARD_HEADERS } from "../functions/dashboard-assets.ts";

const dist = new URL("../dist/ui/", import.meta.url);

/**
 * `_headers` beside the `dashboard/` folder (the root of Workers static assets): the dashboard's
 * response headers on the edge, from the same constant the Node.js host sets them from.
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
      const lines = Object.entries(DASHBOARD_HEADERS).map(([name, value]) => `  ${name}: ${value}`);
      writeFileSync(join(dirname(outDir), "_headers"), `/dashboard/*\n${lines.join("\n")}\n`);
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
  plugins: [workersHeaders()],
  build: {
    outDir: fileURLToPath(new URL("dashboard", dist)),
    emptyOutDir: true,
    target: "es2022",
  },
  server: { port: 5173, strictPort: true },
});

import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { unstable_readConfig } from "wrangler";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The Worker as `npm run build:worker` bundles it (`wrangler deploy --dry-run`), written to
 * `outDir`; resolves to the bundle's script. Start it early and await it late: it takes seconds.
 */
export async function buildWorkerBundle(outDir: string): Promise<string> {
  await promisify(execFile)(
    process.execPath,
    [join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--outdir", outDir],
    { cwd: ROOT, env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" } },
  );
  return readFileSync(join(outDir, "index.js"), "utf8");
}

/** A Miniflare worker config for the bundle, as wrangler.toml deploys it (name, compatibility, module). */
export function workerConfig(script: string, name = "memory-service") {
  return {
    name,
    compatibilityDate: "2026-11-01",
    compatibilityFlags: ["nodejs_compat"],
    manifest: { mainModule: "index.js", modules: { "index.js": { type: "esm" as const, contents: script } } },
  };
}

/** Workers static assets from `directory`, with wrangler.toml's own [assets] settings. */
export function wranglerAssets(directory: string) {
  const assets = unstable_readConfig({ config: join(ROOT, "wrangler.toml") }).assets;
  return {
    directory,
    hasUserWorker: true,
    htmlHandling: assets?.html_handling,
    notFoundHandling: assets?.not_found_handling,
  };
}

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOCS_RENDERER_URL, TAG_GROUPS } from "../../functions/docs";
import { testLogLevel } from "../helpers/log";
import { createTestService } from "../helpers/service";
import { buildWorkerBundle, workerConfig, wranglerAssets } from "../helpers/worker-bundle";

/**
 * `/docs` and its renderer on both hosts, without a browser (tests/e2e/docs.e2e.test.ts renders
 * it in Chromium): the Node.js host serving the assets built from ui/vite.config.ts, and the
 * Worker bundle `wrangler deploy --dry-run` makes, under Miniflare with the same built files as
 * its Workers static assets (wrangler.toml's own [assets] settings).
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** The file the build copies: Scalar's standalone bundle, from its npm package. */
const STANDALONE = join(
  dirname(createRequire(import.meta.url).resolve("@scalar/api-reference")),
  "browser",
  "standalone.js",
);

let dir: string;
let service: Awaited<ReturnType<typeof createTestService>>;
let mf: Miniflare;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "memsvc-docs-"));
  const worker = buildWorkerBundle(join(dir, "worker"));
  await build({
    configFile: join(ROOT, "ui/vite.config.ts"),
    logLevel: "silent",
    build: { outDir: join(dir, "assets/dashboard") },
  });
  service = await createTestService({ dashboardDir: join(dir, "assets") });
  const script = await worker;
  mf = new Miniflare({
    workers: [
      {
        config: {
          ...workerConfig(script),
          assets: wranglerAssets(join(dir, "assets")),
          // /docs makes no query: the database is never reached.
          env: {
            DATABASE_URL: { type: "text", value: "postgres://user:pass@localhost/db" },
            // Errors only: request lines are info, the missing provider a warning (TEST_LOG_LEVEL shows all).
            LOG_LEVEL: { type: "text", value: testLogLevel("error") },
          },
        },
      },
    ],
  });
  await mf.ready;
}, 180_000);

afterAll(async () => {
  await mf?.dispose();
  await service?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What both hosts' responses have (Miniflare's Response type is its own). */
interface Answer {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
}

interface OpenApiDocument {
  tags: { name: string; description?: string }[];
  "x-tagGroups": { name: string; tags: string[] }[];
  paths: Record<string, Record<string, { tags?: string[] }>>;
}

/** The page's checks, the same on both hosts. Returns the nonce. */
async function expectDocsPage(res: Answer) {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/html/);
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  const csp = res.headers.get("content-security-policy") ?? "";
  const nonce = /script-src 'self' 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
  expect(nonce, csp).toBeDefined();
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).not.toContain("unsafe-eval");
  const html = await res.text();
  // Two scripts, both carrying the header's nonce: the renderer from this origin, then its
  // initialiser pointed at /openapi.json. Nothing from another origin.
  const scripts = [...html.matchAll(/<script\b[^>]*>/g)].map(([tag]) => tag);
  expect(scripts).toHaveLength(2);
  for (const tag of scripts) expect(tag).toContain(`nonce="${nonce}"`);
  expect(scripts[0]).toContain(`src="${DOCS_RENDERER_URL}"`);
  expect(html).toContain('"url": "/openapi.json"');
  expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  expect(html).not.toContain("jsdelivr");
  return nonce as string;
}

async function expectRenderer(res: Answer) {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^(application|text)\/javascript/);
  expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  const body = new Uint8Array(await res.arrayBuffer());
  expect(Buffer.from(body).equals(readFileSync(STANDALONE))).toBe(true);
}

describe("/docs on the Node.js host", () => {
  it("answers the page with its CSP and a new nonce each time", async () => {
    const first = await expectDocsPage(await service.app.request("/docs"));
    const second = await expectDocsPage(await service.app.request("/docs"));
    expect(second).not.toBe(first);
  });

  it("serves the renderer's file from the built assets: the package's own bundle, cached for a year", async () => {
    expect(DOCS_RENDERER_URL).toMatch(/^\/docs\/assets\/scalar-api-reference\.js\?v=\d+\.\d+\.\d+$/);
    await expectRenderer(await service.app.request(DOCS_RENDERER_URL));
    const missing = await service.app.request("/docs/assets/missing.js");
    expect(missing.status).toBe(404);
  });

  it("documents its tags in order: the /v1 groups first, every operation's tag among them", async () => {
    const doc = (await (await service.app.request("/openapi.json")).json()) as OpenApiDocument;
    const groups = doc["x-tagGroups"];
    expect(groups.map((g) => g.name)).toEqual(TAG_GROUPS.map((g) => g.name));
    const tagNames = doc.tags.map((t) => t.name);
    expect(tagNames).toEqual(groups.flatMap((g) => g.tags));
    for (const tag of doc.tags) expect(tag.description, tag.name).toMatch(/\S/);
    const v1Tags = new Set(groups[0].tags);
    let operations = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        operations++;
        const where = `${method.toUpperCase()} ${path}`;
        expect(operation.tags, where).toHaveLength(1);
        const tag = operation.tags?.[0] as string;
        expect(tagNames, where).toContain(tag);
        // The first group is exactly the /v1 surface.
        expect(v1Tags.has(tag), where).toBe(path.startsWith("/v1/"));
      }
    }
    expect(operations).toBeGreaterThan(40);
  });
});

describe("/docs on the Worker (workerd, the built bundle and static assets)", () => {
  it("renders the page in the Worker and serves the renderer as a static asset", async () => {
    await expectDocsPage(await mf.dispatchFetch("http://localhost/docs"));
    await expectRenderer(await mf.dispatchFetch(`http://localhost${DOCS_RENDERER_URL}`));
    const document = await mf.dispatchFetch("http://localhost/openapi.json");
    expect(document.status).toBe(200);
    const groups = ((await document.json()) as OpenApiDocument)["x-tagGroups"];
    expect(groups.map((g) => g.name)).toEqual(TAG_GROUPS.map((g) => g.name));
  });
});

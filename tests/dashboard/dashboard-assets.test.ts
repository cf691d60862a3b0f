import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestService } from "../helpers/service";

/** The Node.js host serving the built dashboard (the edge's static assets are in tests/edge). */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
let dir: string;
let service: Awaited<ReturnType<typeof createTestService>>;
let unbuilt: Awaited<ReturnType<typeof createTestService>>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "memsvc-ui-"));
  await build({
    configFile: join(ROOT, "ui/vite.config.ts"),
    logLevel: "silent",
    build: { outDir: join(dir, "built/dashboard") },
  });
  service = await createTestService({ dashboardDir: join(dir, "built") });
  unbuilt = await createTestService({ dashboardDir: join(dir, "empty") });
}, 120_000);

afterAll(async () => {
  await service?.close();
  await unbuilt?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the dashboard's files on the Node.js host", () => {
  it("serves the page revalidated, with the same security headers as the edge's _headers file", async () => {
    const res = await service.app.request("/dashboard/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(await res.text()).toContain('<div id="app">');

    const edgeHeaders = readFileSync(join(dir, "built/_headers"), "utf8");
    for (const name of ["content-security-policy", "x-content-type-options", "referrer-policy"]) {
      expect(edgeHeaders.toLowerCase()).toContain(`${name}: ${res.headers.get(name)}`.toLowerCase());
    }
  });

  it("serves hashed assets as immutable, and a missing one as a 404 rather than the session check", async () => {
    const html = await (await service.app.request("/dashboard/")).text();
    const script = html.match(/src="(\/dashboard\/assets\/[^"]+\.js)"/)?.[1];
    expect(script).toBeDefined();
    const asset = await service.app.request(script as string);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-type")).toMatch(/javascript/);

    const missing = await service.app.request("/dashboard/assets/missing.js");
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: "Not found" });
    const traversal = await service.app.request("/dashboard/assets/..%2f..%2fpackage.json");
    expect(traversal.status).toBe(404);
  });

  it("keeps the API under the same prefix behind the session, and redirects / and /dashboard", async () => {
    const api = await service.app.request("/dashboard/projects");
    expect(api.status).toBe(401);
    for (const path of ["/", "/dashboard"]) {
      const res = await service.app.request(path);
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe("/dashboard/");
    }
  });

  it("redirects /dashboard/index.html (and /dashboard/index) to the page, as the edge's static assets do", async () => {
    for (const path of ["/dashboard/index.html", "/dashboard/index"]) {
      const res = await service.app.request(path);
      expect({ path, status: res.status, location: res.headers.get("location") }).toEqual({
        path,
        status: 302,
        location: "/dashboard/",
      });
    }
    // Built or not: the redirect does not depend on the files.
    expect((await unbuilt.app.request("/dashboard/index.html")).headers.get("location")).toBe("/dashboard/");
  });

  it("says how to build the dashboard when it has not been built", async () => {
    const res = await unbuilt.app.request("/dashboard/");
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("npm run build:ui");
    expect((await unbuilt.app.request("/dashboard/projects")).status).toBe(401);
  });
});

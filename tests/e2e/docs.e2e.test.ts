import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import {
  AFTERWARDS,
  type Browser,
  idle,
  launchBrowser,
  resolveChromium,
  SCREENSHOT_DIR,
  skipStepsAfterFirstFailure,
} from "./browser";
import { buildDashboard, type DashboardService, startDashboardService } from "./service";

/**
 * The API reference (`/docs`, issue 16) in a real browser: the Node.js host over HTTP serving the
 * page, `/openapi.json` and the renderer's bundle from assets built fresh from ui/ (the same files
 * the edge serves as static assets). Every request that leaves the loopback address is blocked
 * and recorded: the page must render with none attempted. Screenshots go to
 * test-results/screenshots/docs-*.png.
 *
 * Without Chromium the file is skipped with a warning, or fails in CI (see ./browser.ts).
 */
const chromiumPath = resolveChromium();

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);
/** An operation whose request body is a `$ref` (RecallRequest) and whose errors are refs too. */
const RECALL = "What the service knows, as a prompt-ready block";
/**
 * The one violation the page is allowed: zod (inside the renderer) probes whether `Function` may
 * run (`try { Function("") } catch {}`) and, refused by `script-src`, validates without it.
 */
const ZOD_EVAL_PROBE = "script-src eval";

describe.skipIf(!chromiumPath)("the API reference in a browser", { timeout: 60_000 }, () => {
  let fake: FakeOpenAI;
  let ui: Awaited<ReturnType<typeof buildDashboard>>;
  let svc: DashboardService;
  let browser: Browser;
  let page: Page;
  /** Requests to anything but the loopback address (all blocked), and every URL the page asked for. */
  const offsite: string[] = [];
  const requested: string[] = [];

  beforeAll(async () => {
    [fake, ui] = await Promise.all([startFakeOpenAI(), buildDashboard()]);
    [svc, browser] = await Promise.all([
      startDashboardService({ provider: fake, dashboardDir: ui.dir }),
      launchBrowser(chromiumPath as string),
    ]);
    page = browser.page;
    await browser.context.route("**/*", (route) => {
      const url = new URL(route.request().url());
      requested.push(url.href);
      if (LOOPBACK.has(url.hostname)) return route.continue();
      offsite.push(url.href);
      return route.abort("blockedbyclient");
    });
    // Content-Security-Policy violations, as the page reports them (init scripts are not subject
    // to the page's CSP).
    await page.addInitScript(() => {
      const w = window as unknown as { cspViolations: string[] };
      w.cspViolations = [];
      document.addEventListener("securitypolicyviolation", (e) =>
        w.cspViolations.push(`${e.effectiveDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`.trim()),
      );
    });
  }, 180_000); // two browser launches of up to a minute each (tests/e2e/browser.ts)

  skipStepsAfterFirstFailure();

  afterAll(async () => {
    await browser?.close();
    await svc?.close();
    await fake?.close();
    ui?.remove();
  });

  const screenshot = async (name: string) => {
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`) });
  };

  it("renders the reference from /openapi.json with its own CSP", async () => {
    const response = await page.goto(`${svc.url}/docs`);
    expect(response?.status()).toBe(200);
    const csp = response?.headers()["content-security-policy"] ?? "";
    expect(csp).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9+/=]+'/);
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain("unsafe-eval");
    await page.getByRole("heading", { name: "Conversational Memory Service" }).waitFor({ timeout: 20_000 });
    await page.getByRole("link", { name: RECALL }).waitFor();
    await idle(page);
    // The renderer came from this origin, pinned by version; the document from /openapi.json.
    expect(requested.some((url) => /\/docs\/assets\/scalar-api-reference\.js\?v=\d/.test(url))).toBe(true);
    expect(requested.some((url) => url.endsWith("/openapi.json"))).toBe(true);
    // The description's markdown is rendered: backticks become code, not literal text.
    const intro = await page.evaluate(() => document.body.textContent ?? "");
    expect(intro).not.toContain("`/v1/*`");
    await page
      .locator("code", { hasText: /^\/v1\/\*$/ })
      .first()
      .waitFor();
    await screenshot("docs-1280");
  });

  it("lists the /v1 groups first, then the internal routes, then the service's own", async () => {
    const text = await page.evaluate(() => document.body.textContent ?? "");
    const at = (needle: string) => {
      const index = text.indexOf(needle);
      expect(index, `"${needle}" on the page`).toBeGreaterThanOrEqual(0);
      return index;
    };
    // The sidebar's group headings and tags, in order.
    const order = [
      "API (/v1, API key)",
      "Threads",
      "Working memory",
      "Episodic memory",
      "Semantic memory",
      "Recall",
      "Internal (dashboard, session token)",
      "Internal: auth",
      "Internal: dashboard",
      "Health",
    ].map(at);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    // The operations' links: every /v1 operation before every internal one, /health last.
    const hrefs = await page.evaluate(() =>
      [...document.querySelectorAll('a[href*="tag/"]')].map((a) => decodeURIComponent(a.getAttribute("href") ?? "")),
    );
    const paths = hrefs.flatMap((href) => /tag\/[^/]+\/(?:GET|POST|PATCH|PUT|DELETE)(\/.*)$/.exec(href)?.[1] ?? []);
    const kinds = paths.map((path) => (path.startsWith("/v1/") ? 0 : path === "/health" ? 2 : 1));
    expect(kinds.length).toBeGreaterThan(40);
    expect(kinds).toEqual([...kinds].sort((a, b) => a - b));
    expect(new Set(kinds)).toEqual(new Set([0, 1, 2]));
  });

  it("opens an operation with its resolved request schema, rendered markdown and its errors", async () => {
    await page.getByRole("link", { name: RECALL }).click();
    await idle(page);
    const section = page.locator('section[id$="/tag/recall/POST/v1/memory/recall"]');
    await section.getByRole("heading", { name: RECALL }).waitFor();
    // The body is RecallRequest, a $ref: its fields, bounds and descriptions are on the page.
    for (const field of ["dataset", "minConfidence", "asOf"]) {
      await section.locator(`[id$=".body.${field}"]`).waitFor();
    }
    const body = (await section.textContent()) ?? "";
    expect(body).toContain("RecallRequest");
    expect(body).toContain("retrievalMinConfidence");
    expect(body).not.toContain("`raw`");
    await section.locator("code", { hasText: /^raw$/ }).first().waitFor();
    // Every documented status is listed; the 400's schema (ValidationError, a $ref) opens.
    for (const status of ["200", "400", "401", "500"]) {
      await section.locator(`[id$=".responses.${status}"]`).waitFor();
    }
    await section.locator('[id$=".responses.400"]').click();
    await section.getByText("issues", { exact: true }).first().waitFor();
    await section.locator('[id$=".responses.400"]').scrollIntoViewIfNeeded();
    await screenshot("docs-operation-1280");
  });

  describe(AFTERWARDS, () => {
    it("asked for nothing outside the loopback address, and broke no CSP rule", async () => {
      expect(offsite).toEqual([]);
      const violations = await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations);
      expect(violations.filter((v) => !v.startsWith(ZOD_EVAL_PROBE))).toEqual([]);
      expect(browser.pageErrors).toEqual([]);
      expect(browser.consoleErrors).toEqual([]);
    });
  });
});

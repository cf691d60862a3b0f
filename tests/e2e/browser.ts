import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BrowserContext, chromium, type Page, type Request } from "playwright-core";
import { beforeEach } from "vitest";

/**
 * The browser of the end-to-end tests: the system's Chromium (Debian's `chromium` package),
 * driven by playwright-core. Playwright never downloads a browser here: there is no network.
 *
 * Where it is: `CHROMIUM_PATH`, else `/usr/bin/chromium`. When it is missing:
 * - in CI (`CI` set) the suite FAILS, saying to `apt-get install chromium` (.ci/run installs it);
 * - elsewhere the suite is SKIPPED with a loud warning, so `npm test` still runs on a machine
 *   without a browser (install it, or point CHROMIUM_PATH at one, to run the dashboard tests).
 */
export const DEFAULT_CHROMIUM = "/usr/bin/chromium";

/** Flags for a headless run as root on a closed network (no sandbox, no background traffic). */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The Chromium to use, or undefined (after a loud warning) when the suite is to be skipped. */
export function resolveChromium(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const path = env.CHROMIUM_PATH?.trim() || DEFAULT_CHROMIUM;
  if (existsSync(path)) return path;
  const where = env.CHROMIUM_PATH?.trim() ? `CHROMIUM_PATH=${path}` : path;
  if (env.CI && env.CI !== "false" && env.CI !== "0") {
    throw new Error(
      `Chromium not found at ${where}: the dashboard end-to-end tests need it in CI. ` +
        "Install it with `apt-get install chromium` (or set CHROMIUM_PATH to a Chromium binary).",
    );
  }
  const line = "!".repeat(100);
  console.warn(
    [
      line,
      `!! SKIPPING the dashboard end-to-end tests (tests/e2e): no Chromium at ${where}.`,
      "!! Install it (`apt-get install chromium`) or set CHROMIUM_PATH to run them. In CI (CI set) this fails.",
      line,
    ].join("\n"),
  );
  return undefined;
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Uncaught exceptions in the page, and console errors, as they happened. */
  pageErrors: string[];
  consoleErrors: string[];
  close(): Promise<void>;
}

/**
 * How long Chromium may take to start. At the start of `npm test`, with every test file starting
 * its servers at once on two cores, a launch once took over 30 s (the old limit); a second
 * attempt follows a first that timed out.
 */
const LAUNCH_TIMEOUT_MS = 60_000;
const LAUNCH_ATTEMPTS = 2;

/** One headless Chromium with a fresh temporary profile, and its first page. */
export async function launchBrowser(executablePath: string): Promise<Browser> {
  let profile = "";
  let context: BrowserContext | undefined;
  for (let attempt = 1; !context; attempt++) {
    profile = mkdtempSync(join(tmpdir(), "memsvc-e2e-profile-"));
    try {
      context = await chromium.launchPersistentContext(profile, {
        executablePath,
        headless: true,
        args: CHROMIUM_ARGS,
        viewport: { width: 1280, height: 800 },
        // The same rendering on every machine: light scheme, no animations to catch midway.
        colorScheme: "light",
        reducedMotion: "reduce",
        timeout: LAUNCH_TIMEOUT_MS,
      });
    } catch (err) {
      removeProfile(profile);
      if (attempt >= LAUNCH_ATTEMPTS) throw err;
      console.warn(`Chromium did not start (attempt ${attempt}): ${(err as Error).message.split("\n")[0]}`);
    }
  }
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors: string[] = [];
  const consoleErrors: string[] = [];
  page.on("pageerror", (err) => pageErrors.push(err.stack ?? err.message));
  page.on("console", (msg) => {
    if (msg.type() === "error") consoleErrors.push(msg.text());
  });
  // Requests in flight, for idle(): a list is loading until its request has answered.
  const inFlight = new Set<Request>();
  page.on("request", (r) => inFlight.add(r));
  page.on("requestfinished", (r) => inFlight.delete(r));
  page.on("requestfailed", (r) => inFlight.delete(r));
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) for (const r of inFlight) if (r.isNavigationRequest()) inFlight.delete(r);
  });
  requestsInFlight.set(page, inFlight);
  return {
    context,
    page,
    pageErrors,
    consoleErrors,
    async close() {
      await context.close().catch(() => {});
      removeProfile(profile);
    },
  };
}

/**
 * Deletes a temporary profile. A Chromium killed by a launch timeout may still be writing to it
 * (ENOTEMPTY): what it leaves in the temporary directory must not hide the launch's own error.
 */
function removeProfile(profile: string) {
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch (err) {
    console.warn(`could not remove the browser profile ${profile}: ${(err as Error).message}`);
  }
}

const requestsInFlight = new WeakMap<Page, Set<Request>>();

/**
 * Waits until the page has settled: no request of its own in flight for a moment (the lists load
 * after the click that shows them) and nothing on the page says it is busy (the boot
 * placeholder, progress bars), then two frames so the last render is laid out.
 */
export async function idle(page: Page, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  const inFlight = requestsInFlight.get(page);
  let quietSince = Date.now();
  for (;;) {
    if (inFlight && inFlight.size > 0) quietSince = Date.now();
    else if (Date.now() - quietSince >= 100) break;
    if (Date.now() > deadline) {
      throw new Error(`page not idle after ${timeoutMs} ms: ${[...(inFlight ?? [])].map((r) => r.url()).join(", ")}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  await page.waitForFunction(() => document.querySelectorAll('[aria-busy="true"]').length === 0, undefined, {
    timeout: Math.max(1000, deadline - Date.now()),
  });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

export const SCREENSHOT_DIR = fileURLToPath(new URL("../../test-results/screenshots/", import.meta.url));
export const WIDTHS = [375, 1280] as const;
export const NARROW = 375;

/** A page wider than the narrow viewport: how wide, and the innermost elements sticking out. */
export interface Overflow {
  page: string;
  scrollWidth: number;
  offenders: string[];
}

/**
 * Full-page screenshots of the current page at each width (`<name>-<width>.png`), and at 375 px
 * the readability check the issue asks for: is the document wider than the viewport (sideways
 * scrolling)? Returns what sticks out, or undefined; the caller collects them and asserts once,
 * so one bad page neither stops the flow nor hides the others. The viewport goes back to 1280 px.
 */
export async function capture(page: Page, name: string): Promise<Overflow | undefined> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  let overflow: Overflow | undefined;
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 800 });
    await idle(page);
    if (width === NARROW) {
      const measured = await page.evaluate(measureOverflow, NARROW);
      if (measured.scrollWidth > NARROW) overflow = { page: name, ...measured };
    }
    // Full page: the viewport as tall as the document, so sticky bars (the settings' save bar)
    // sit where they end up rather than over the middle of the page.
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    if (height > 800) {
      await page.setViewportSize({ width, height: Math.min(height, 10_000) });
      await idle(page);
    }
    await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  return overflow;
}

/**
 * In the page: the document's width, and the innermost elements past `limit` that no ancestor
 * clips. A wide table inside an `overflow: auto` wrapper scrolls on its own and is fine; an
 * absolutely positioned element is clipped only by overflow on its containing block or above
 * it (so a `position: absolute` label in such a table can still widen the whole page).
 */
export function measureOverflow(limit: number) {
  const scrollWidth = document.documentElement.scrollWidth;
  const sticksOut = (el: Element) => {
    if (el.getBoundingClientRect().right <= limit + 0.5) return false;
    let position = getComputedStyle(el).position;
    if (position === "fixed") return false; // never part of the document's scrollable area
    // Until the containing block is reached, an absolutely positioned box escapes overflow.
    let escaping = position === "absolute";
    for (let p = el.parentElement; p && p !== document.documentElement; p = p.parentElement) {
      const style = getComputedStyle(p);
      const positioned = style.position !== "static";
      if (
        (!escaping || positioned) &&
        style.overflowX !== "visible" &&
        p.getBoundingClientRect().right <= limit + 0.5
      ) {
        return false;
      }
      if (escaping && positioned) {
        position = style.position;
        if (position === "fixed") return false;
        escaping = position === "absolute";
      }
    }
    return true;
  };
  const all = [...document.body.querySelectorAll("*")].filter(sticksOut);
  const innermost = all.filter((el) => !all.some((other) => other !== el && el.contains(other)));
  const describe = (el: Element) => {
    const cls = el.getAttribute("class");
    const text = (el.textContent ?? "").trim().replace(/\s+/g, " ").slice(0, 40);
    const right = Math.round(el.getBoundingClientRect().right);
    return `<${el.tagName.toLowerCase()}${cls ? ` class="${cls}"` : ""}> "${text}" (right edge ${right} px)`;
  };
  return { scrollWidth, offenders: innermost.slice(0, 6).map(describe) };
}

/** The suite whose tests run even after a step failed (clean-up checks, e.g. no CSP errors). */
export const AFTERWARDS = "afterwards";

/**
 * The steps of an e2e file build on each other: after the first failure the rest are skipped
 * (and say which step failed) rather than each waiting out its own timeouts. Tests in a suite
 * named AFTERWARDS still run. Call it inside the file's describe.
 */
export function skipStepsAfterFirstFailure(): void {
  let failedStep: string | undefined;
  beforeEach(({ task, skip, onTestFailed }) => {
    if (task.suite?.name === AFTERWARDS) return;
    if (failedStep) skip(`an earlier step failed: ${failedStep}`);
    onTestFailed(() => {
      failedStep ??= task.name;
    });
  });
}

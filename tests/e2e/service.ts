import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { createNodeServer } from "../../functions/node-host";
import type { FakeOpenAI } from "../helpers/fake-openai";
import { ADMIN, createTestService } from "../helpers/service";

export { ADMIN };

const UI_CONFIG = fileURLToPath(new URL("../../ui/vite.config.ts", import.meta.url));

/**
 * The dashboard built from the current `ui/` source with Vite's own build() and the repository's
 * ui/vite.config.ts, into a temporary directory laid out as the Node.js host expects
 * (`<dir>/dashboard/index.html`, `_headers` beside it): the tests never see a stale `dist/ui`.
 */
export async function buildDashboard(): Promise<{ dir: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), "memsvc-e2e-ui-"));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    await build({ configFile: UI_CONFIG, logLevel: "error", build: { outDir: join(dir, "dashboard") } });
  } catch (err) {
    remove();
    throw err;
  }
  return { dir, remove };
}

/**
 * The Node.js host as `npm start` runs it, over real HTTP on 127.0.0.1 (a free port): the test
 * service (a fresh copy of the migrated template database, the admin's password known as ADMIN)
 * with the fake provider and the real timer doorbell, so a thread's end runs its episode
 * (summary, then facts) at once in the background, as in production.
 */
export async function startDashboardService(options: { provider: FakeOpenAI; dashboardDir: string }) {
  const service = await createTestService({
    provider: options.provider,
    doorbell: "timers",
    dashboardDir: options.dashboardDir,
  });
  // The Node.js host's own server, as `npm start` runs it.
  const server = await new Promise<ReturnType<typeof createNodeServer>>((resolve, reject) => {
    const s = createNodeServer({
      fetch: service.app.fetch,
      hostname: "127.0.0.1",
      keepAliveTimeoutMs: service.deps.config.keepAliveTimeoutMs,
      headersTimeoutMs: service.deps.config.headersTimeoutMs,
    });
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => resolve(s));
  }).catch(async (err) => {
    await service.close();
    throw err;
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    service,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // The browser keeps connections alive; they would hold close() open.
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
      await service.close();
    },
  };
}

export type DashboardService = Awaited<ReturnType<typeof startDashboardService>>;

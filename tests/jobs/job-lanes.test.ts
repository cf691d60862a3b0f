import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JOB_CONCURRENCY, runDueJobs } from "../../lib/jobs/runner";
import { eraseDataset } from "../../lib/recall/dataset";
import { useEpisodicService } from "../helpers/episodic-fixtures";
import { adminSession } from "../helpers/service";

/**
 * Webhook deliveries and model work run in lanes of their own (lib/jobs/kinds.ts): a receiver
 * that holds every request open fills the webhook lane's slots, and an episode still completes
 * meanwhile. Before, the two shared one set of slots: deliveries due first took them all, and the
 * episode waited until the attempts timed out (WEBHOOK_TIMEOUT_MS each).
 */
const { h, tenant } = useEpisodicService({
  env: { WEBHOOKS_ALLOW_HTTP: "true", WEBHOOK_TIMEOUT_MS: "60000" },
});

const held: ServerResponse[] = [];
const receiver = createServer((req, res) => {
  req.resume();
  held.push(res);
});
let url = "";
beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});

describe("job lanes", () => {
  it("an episode completes while a hanging receiver holds every webhook slot", async () => {
    const t = await tenant("lanes");
    const res = await h.svc.request("/dashboard/webhooks", {
      method: "POST",
      token: await adminSession(h.svc),
      json: { projectId: t.projectId, url, eventTypes: ["dataset.erased"] },
    });
    expect(res.status).toBe(201);
    // More deliveries than slots, due before the episode.
    for (let i = 0; i < JOB_CONCURRENCY + 4; i++) {
      await eraseDataset({ deps: h.svc.deps, projectId: t.projectId }, { dataset: `gone-${i}` });
    }
    h.clock.advance(1_000);
    const threadId = await t.thread("ds");
    await t.say(threadId, "I live in Lisbon.");
    const { episodeId } = await t.end(threadId);

    const running = runDueJobs(h.svc.deps);
    await expect.poll(() => held.length, { timeout: 10_000, interval: 20 }).toBe(JOB_CONCURRENCY);
    await expect
      .poll(async () => (await t.episode(episodeId as string)).status, { timeout: 10_000, interval: 50 })
      .toBe("completed");
    // Still held: the episode did not wait for a webhook slot to free.
    expect(held.length).toBe(JOB_CONCURRENCY);
    for (const r of held.splice(0)) r.writeHead(204).end();
    // The rest go through once slots free up.
    await expect
      .poll(
        () => {
          for (const r of held.splice(0)) r.writeHead(204).end();
          return Promise.race([running.then(() => "done"), new Promise((r) => setTimeout(() => r("running"), 50))]);
        },
        { timeout: 10_000, interval: 50 },
      )
      .toBe("done");
  });
});

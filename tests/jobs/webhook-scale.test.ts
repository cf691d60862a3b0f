import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { endpointSelect, listWebhookEndpoints } from "../../lib/webhooks/endpoints";
import { deleteExpiredDeliveries, deleteExpiredDeliveryBacklog } from "../../lib/webhooks/retention";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Finished webhook deliveries and their attempts were kept for good. The sweep (every minute on
 * the edge) now deletes those past WEBHOOK_RETENTION_DAYS, reading only them through a partial
 * index (migration 0031): never the deliveries it keeps, however many. The dashboard's endpoint
 * list reads each endpoint's last attempt and pending deliveries through two more (migration
 * 0032), not every delivery of the endpoint.
 */
let svc: TestService;
let kept: TestService;
beforeAll(async () => {
  // Databases of their own: the plan depends on the table's size, and one keeps deliveries for ever.
  [svc, kept] = await Promise.all([
    createTestService({ manualTime: true }),
    createTestService({ manualTime: true, env: { WEBHOOK_RETENTION_DAYS: "0" } }),
  ]);
});
afterAll(async () => {
  await Promise.all([svc?.close(), kept?.close()]);
});

const DAY = 86_400_000;

/** A new project with one webhook endpoint. */
async function newEndpoint(s: TestService, name: string) {
  const { projectId } = await newTenant(s, name);
  const endpointId = `whe_${projectId}`;
  await s.deps.db.execute(sql`
    INSERT INTO webhook_endpoints (id, project_id, url, secret, event_types)
    VALUES (${endpointId}, ${projectId}, 'https://example.com/hook', 'whsec_x', '["dataset.erased"]'::jsonb)`);
  return { projectId, endpointId };
}

/** An endpoint, and deliveries whose retry window closed `closedDaysAgo` days back, each with one attempt. */
async function seed(s: TestService, rows: { prefix: string; n: number; status: string; closedDaysAgo: number }[]) {
  const { projectId, endpointId } = await newEndpoint(s, "retention");
  const now = s.deps.clock.now().getTime();
  for (const r of rows) {
    const closed = new Date(now - r.closedDaysAgo * DAY).toISOString();
    await s.deps.db.execute(sql`
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, event_type, payload, status, attempts, retry_until)
      SELECT ${r.prefix} || g, ${endpointId}, ${projectId}, 'dataset.erased', '{}'::jsonb, ${r.status}, 1,
        ${closed}::timestamptz - make_interval(secs => g)
      FROM generate_series(1, ${r.n}) g`);
    await s.deps.db.execute(sql`
      INSERT INTO webhook_attempts (id, delivery_id, attempted_at, status_code, duration_ms)
      SELECT 'wha_' || id, id, retry_until, 200, 5 FROM webhook_deliveries WHERE id LIKE ${`${r.prefix}%`}`);
  }
}

const count = async (s: TestService, table: "webhook_deliveries" | "webhook_attempts") =>
  (rowsOf(await s.deps.db.execute(sql`SELECT count(*)::int AS n FROM ${sql.raw(table)}`))[0] as { n: number }).n;

describe("webhook delivery retention", () => {
  it("deletes only finished deliveries past the retention, through its index, oldest first in bounded batches", async () => {
    await seed(svc, [
      // 3,000 recent finished deliveries, kept; 5 past the retention; 2 as old but still pending.
      { prefix: "whd_recent_", n: 3000, status: "succeeded", closedDaysAgo: 1 },
      { prefix: "whd_old_ok_", n: 3, status: "succeeded", closedDaysAgo: 31 },
      { prefix: "whd_old_failed_", n: 2, status: "failed", closedDaysAgo: 40 },
      { prefix: "whd_old_pending_", n: 2, status: "pending", closedDaysAgo: 40 },
    ]);
    await svc.deps.db.execute(sql`ANALYZE webhook_deliveries`);

    const cutoff = new Date(svc.deps.clock.now().getTime() - 30 * DAY).toISOString();
    const plan = planOf(
      await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON)
        SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND retry_until < ${cutoff}::timestamptz
        ORDER BY retry_until LIMIT 2`),
    );
    const read = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "webhook_deliveries");
    expect(read.map((n) => n["Index Name"])).toEqual(["webhook_deliveries_retention_idx"]);
    expect(read[0]["Actual Rows"]).toBe(2);

    // Oldest first: a batch of 2 takes the two failed ones (closed 40 days ago).
    expect(await deleteExpiredDeliveries(svc.deps, new Date(cutoff), 2)).toBe(2);
    const left = (prefix: string) =>
      svc.deps.db
        .execute(sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE id LIKE ${`${prefix}%`}`)
        .then((r) => (rowsOf(r)[0] as { n: number }).n);
    expect(await left("whd_old_failed_")).toBe(0);
    expect(await left("whd_old_ok_")).toBe(3);

    // The sweep's step drains the rest in batches; pending and recent ones stay, with their attempts.
    expect(await deleteExpiredDeliveryBacklog(svc.deps, { batch: 2, batches: 20 })).toBe(3);
    expect(await left("whd_old_ok_")).toBe(0);
    expect(await left("whd_old_pending_")).toBe(2);
    expect(await count(svc, "webhook_deliveries")).toBe(3002);
    expect(await count(svc, "webhook_attempts")).toBe(3002);
  });

  it("keeps every delivery with WEBHOOK_RETENTION_DAYS=0", async () => {
    await seed(kept, [{ prefix: "whd_ancient_", n: 3, status: "succeeded", closedDaysAgo: 3650 }]);
    expect(await deleteExpiredDeliveryBacklog(kept.deps, { batch: 2, batches: 20 })).toBe(0);
    expect(await count(kept, "webhook_deliveries")).toBe(3);
  });
});

describe("the dashboard's endpoint list", () => {
  it("reads an endpoint's last attempt and its pending deliveries alone, however many it has", async () => {
    const { projectId, endpointId } = await newEndpoint(svc, "endpoint-list");
    const now = svc.deps.clock.now().getTime();
    // 3,000 delivered (the newest attempt an hour ago), 2 pending: one attempted, one not yet.
    await svc.deps.db.execute(sql`
      INSERT INTO webhook_deliveries (id, endpoint_id, project_id, event_type, payload, status, attempts, retry_until,
        next_attempt_at, last_status_code, updated_at)
      SELECT 'whd_list_' || g, ${endpointId}, ${projectId}, 'dataset.erased', '{}'::jsonb,
        CASE WHEN g <= 2 THEN 'pending' ELSE 'succeeded' END, CASE WHEN g = 1 THEN 0 ELSE 1 END,
        ${new Date(now + DAY).toISOString()}::timestamptz,
        CASE WHEN g <= 2 THEN ${new Date(now + 60_000).toISOString()}::timestamptz + make_interval(secs => g) END,
        CASE WHEN g = 2 THEN 503 ELSE 200 END,
        ${new Date(now - 3_600_000).toISOString()}::timestamptz - make_interval(secs => g)
      FROM generate_series(1, 3002) g`);
    await svc.deps.db.execute(sql`ANALYZE webhook_deliveries`);

    const plan = planOf(
      await svc.deps.db.execute(
        sql`EXPLAIN (ANALYZE, FORMAT JSON) ${endpointSelect(sql`ep.id = ${endpointId}`, new Date(now).toISOString())}`,
      ),
    );
    const nodes = planNodes(plan.Plan);
    const reads = nodes.filter((n) => n["Relation Name"] === "webhook_deliveries");
    expect(reads.map((n) => n["Node Type"])).not.toContain("Seq Scan");
    // Through the two indexes alone (a count may take the pending index as a bitmap).
    const indexes = new Set(
      nodes.flatMap((n) => (String(n["Index Name"] ?? "").startsWith("webhook_deliveries") ? [n["Index Name"]] : [])),
    );
    expect(indexes).toEqual(new Set(["webhook_deliveries_last_attempt_idx", "webhook_deliveries_pending_idx"]));
    // The last attempt is one row; the pending ones two (read twice: the count and the next attempt).
    expect(reads.reduce((rows, n) => rows + (n["Actual Rows"] as number), 0)).toBeLessThanOrEqual(5);

    const { endpoints } = await listWebhookEndpoints({ deps: svc.deps, projectId });
    expect(endpoints).toHaveLength(1);
    expect(endpoints[0]).toMatchObject({
      lastDelivery: { id: "whd_list_2", status: "pending", statusCode: 503 },
      pendingDeliveries: 2,
      nextAttemptAt: new Date(now + 61_000).toISOString(),
    });
  });
});

describe("a dataset's erase", () => {
  it("finds the deliveries whose event names the dataset through their index, not every delivery kept", async () => {
    const { projectId, endpointId } = await newEndpoint(svc, "erase-deliveries");
    const deliveries = (prefix: string, dataset: string, n: number) =>
      svc.deps.db.execute(sql`
        INSERT INTO webhook_deliveries (id, endpoint_id, project_id, event_type, payload, status, retry_until)
        SELECT ${prefix} || g, ${endpointId}, ${projectId}, 'episode.completed',
          jsonb_build_object('data', jsonb_build_object('dataset', ${dataset}::text)), 'succeeded', now()
        FROM generate_series(1, ${n}) g`);
    await deliveries("whd_kept_", "other", 3000);
    await deliveries("whd_erased_", "ds", 2);
    await svc.deps.db.execute(sql`ANALYZE webhook_deliveries`);
    // The erase's own condition (lib/recall/dataset.ts, eraseDataset's `wd`).
    const plan = planOf(
      await svc.deps.db.execute(sql`EXPLAIN (ANALYZE, FORMAT JSON)
        SELECT id FROM webhook_deliveries WHERE project_id = ${projectId}
          AND payload -> 'data' ->> 'dataset' = ${"ds"} AND event_type <> 'dataset.erased'`),
    );
    const read = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "webhook_deliveries");
    expect(read.map((n) => n["Index Name"])).toEqual(["webhook_deliveries_dataset_idx"]);
    expect(read[0]["Actual Rows"]).toBe(2);
    expect(read[0]["Rows Removed by Filter"] ?? 0).toBe(0);
  });
});

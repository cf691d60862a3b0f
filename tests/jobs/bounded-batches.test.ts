import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { deleteExpiredKeys } from "../../lib/idempotency";
import { requeueFailedExtractions } from "../../lib/semantic/jobs";
import { deleteExpiredDeliveries } from "../../lib/webhooks/retention";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The sweep's bounded batches take at most their limit, whatever plan the statistics choose.
 * Each picks its rows with a locking `SELECT ... LIMIT n FOR UPDATE SKIP LOCKED`. As a plain
 * `IN (subquery)` the planner, told by the statistics that the table holds one row, rescans that
 * subquery for each row of the table; each rescan skips the rows the statement itself just changed
 * and takes the next, so a batch of one took every eligible row (a job claim leased several jobs
 * and ran one: tests/jobs/jobs.test.ts). The subquery is a `MATERIALIZED` CTE, evaluated once.
 * Each case: one eligible row, the table analysed, two more rows, a batch of one.
 */
let svc: TestService;
beforeAll(async () => {
  // A database of its own: the statistics of its tables are the test's.
  svc = await createTestService();
});
afterAll(async () => {
  await svc?.close();
});

const DAY = 86_400_000;
const count = async (query: ReturnType<typeof sql>) => (rowsOf(await svc.deps.db.execute(query))[0] as { n: number }).n;

describe("a sweep's bounded batch of one takes one (the statistics say the table holds one row)", () => {
  it("expired Idempotency-Key rows", async () => {
    const { projectId } = await newTenant(svc, "batch-keys");
    const expired = (i: number) => new Date(svc.deps.clock.now().getTime() - 3 * DAY + i).toISOString();
    const insert = (from: number, to: number) =>
      svc.deps.db.execute(sql`
        INSERT INTO idempotency_keys (project_id, key, fingerprint, claim_id, response_status, expires_at)
        SELECT ${projectId}, 'key-' || g, 'f', 'c', 200, ${expired(0)}::timestamptz + make_interval(secs => g)
        FROM generate_series(${from}::int, ${to}::int) g`);
    await insert(0, 0);
    await svc.deps.db.execute(sql`ANALYZE idempotency_keys`);
    await insert(1, 2);
    expect(await deleteExpiredKeys(svc.deps, 1)).toBe(1);
    expect(await count(sql`SELECT count(*)::int AS n FROM idempotency_keys WHERE project_id = ${projectId}`)).toBe(2);
  });

  it("finished webhook deliveries past their retention", async () => {
    const { projectId } = await newTenant(svc, "batch-deliveries");
    const endpointId = `whe_${projectId}`;
    await svc.deps.db.execute(sql`
      INSERT INTO webhook_endpoints (id, project_id, url, secret, event_types)
      VALUES (${endpointId}, ${projectId}, 'https://example.com/hook', 'whsec_x', '["dataset.erased"]'::jsonb)`);
    const closed = new Date(svc.deps.clock.now().getTime() - 30 * DAY);
    const insert = (from: number, to: number) =>
      svc.deps.db.execute(sql`
        INSERT INTO webhook_deliveries (id, endpoint_id, project_id, event_type, payload, status, attempts, retry_until)
        SELECT 'msg_batch_' || g, ${endpointId}, ${projectId}, 'dataset.erased', '{}'::jsonb, 'succeeded', 1,
          ${closed.toISOString()}::timestamptz + make_interval(secs => g)
        FROM generate_series(${from}::int, ${to}::int) g`);
    await insert(0, 0);
    await svc.deps.db.execute(sql`ANALYZE webhook_deliveries`);
    await insert(1, 2);
    expect(await deleteExpiredDeliveries(svc.deps, new Date(closed.getTime() + DAY), 1)).toBe(1);
    expect(await count(sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE project_id = ${projectId}`)).toBe(2);
  });

  it("failed extractions due a retry", async () => {
    const { projectId } = await newTenant(svc, "batch-extractions");
    const failedAt = new Date(svc.deps.clock.now().getTime() - DAY).toISOString();
    const insert = (from: number, to: number) =>
      svc.deps.db.execute(sql`
        INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, message_count,
          from_seq, to_seq, started_at, ended_at, updated_at)
        SELECT 'epi_batch_' || g, ${projectId}, 'thr_batch', 'd', 'completed', 'failed', 1, 1, 1,
          ${failedAt}::timestamptz, ${failedAt}::timestamptz, ${failedAt}::timestamptz + make_interval(secs => g)
        FROM generate_series(${from}::int, ${to}::int) g`);
    await insert(0, 0);
    await svc.deps.db.execute(sql`ANALYZE episodes`);
    await insert(1, 2);
    expect(await requeueFailedExtractions(svc.deps, 1)).toBe(1);
    expect(
      await count(
        sql`SELECT count(*)::int AS n FROM episodes WHERE project_id = ${projectId} AND semantic_status = 'pending'`,
      ),
    ).toBe(1);
  });
});

import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failedExtractionsSql, requeueFailedExtractions } from "../../lib/semantic/jobs";
import { planNodes, planOf } from "../helpers/plan";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The sweep's retry of failed fact extractions runs every minute on the edge. It looked for the
 * failed rows among every episode of every project, so each sweep read the whole episodes table
 * (300,000 episodes: 120-190 ms a sweep on a PostgreSQL server). The failures are few: it reads
 * them alone now, through a partial index (migration 0029).
 */
let svc: TestService;
beforeAll(async () => {
  // A database of its own: the plan depends on the episodes table's size.
  svc = await createTestService();
});
afterAll(async () => {
  await svc?.close();
});

const DAY = 86_400_000;

describe("the sweep's retry of failed extractions", () => {
  it("reads the failed extractions alone, however many episodes completed around them", async () => {
    const { projectId } = await newTenant(svc, "retry-scale");
    const now = svc.deps.clock.now().getTime();
    const old = new Date(now - DAY).toISOString();
    // 3,000 episodes whose facts were extracted; two failed extractions due a retry, and one that
    // has had all its retries.
    await svc.deps.db.execute(sql`
      INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, semantic_retry_count,
        message_count, from_seq, to_seq, started_at, ended_at, updated_at)
      SELECT 'epi_scale_' || g, ${projectId}, 'thr_scale', 'd', 'completed',
        CASE WHEN g <= 3 THEN 'failed' ELSE 'completed' END, CASE WHEN g = 3 THEN 3 ELSE 0 END,
        1, 1, 1, ${old}::timestamptz, ${old}::timestamptz, ${old}::timestamptz - make_interval(secs => g)
      FROM generate_series(1, 3003) g`);
    // Statistics as autovacuum would have them for a table this size.
    await svc.deps.db.execute(sql`ANALYZE episodes`);

    const olderThan = new Date(now - 60_000).toISOString();
    const plan = planOf(
      await svc.deps.db.execute(
        sql`EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM (${failedExtractionsSql(olderThan, 100)}) due`,
      ),
    );
    const read = planNodes(plan.Plan).filter((n) => n["Relation Name"] === "episodes");
    expect(read.map((n) => n["Index Name"])).toEqual(["episodes_extraction_retry_idx"]);
    // The three failed rows, the exhausted one dropped by the retry cap; none of the 3,000 others.
    expect(read[0]["Actual Rows"]).toBe(2);
    expect(read[0]["Rows Removed by Filter"] ?? 0).toBeLessThanOrEqual(1);

    expect(await requeueFailedExtractions(svc.deps)).toBe(2);
    expect(await requeueFailedExtractions(svc.deps)).toBe(0);
  });
});

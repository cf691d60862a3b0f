import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbInt, parsedRowsOf } from "./rows";
import type { Db } from "./types";

/**
 * Runs `deletion` (a DELETE without RETURNING) and answers how many rows it deleted, counted in
 * the statement: no row travels back, however many went.
 */
export async function countDeleted(db: Db, deletion: SQL): Promise<number> {
  const [row] = parsedRowsOf(
    z.object({ deleted: dbInt }),
    await db.execute(sql`WITH gone AS (${deletion} RETURNING 1) SELECT count(*)::int AS deleted FROM gone`),
  );
  return row?.deleted ?? 0;
}

/**
 * A backlog deleted in bounded statements: `deleteBatch(batch)` runs again while it finds a full
 * batch (more may be left), at most `batches` times. Returns how many rows went. What is left past
 * the cap waits for the next sweep: the rows a sweep deletes are inert.
 */
export async function drainInBatches(
  deleteBatch: (limit: number) => Promise<number>,
  { batch, batches }: { batch: number; batches: number },
): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < batches; i++) {
    const n = await deleteBatch(batch);
    deleted += n;
    if (n < batch) break;
  }
  return deleted;
}

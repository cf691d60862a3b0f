import { sql } from "drizzle-orm";

/**
 * A condition that is always true and, once evaluated, lets the statement's transaction commit
 * without waiting for its write-ahead log to reach the disk (`synchronous_commit` off for this one
 * transaction, on every host). For bookkeeping whose loss to a power cut is harmless: the WAL is
 * sequential, so the next durable commit (a request's own write) flushes it too. Put it in a WHERE
 * beside the row's own condition, or in a select list, so it runs only when the statement writes.
 * Never for a client's write.
 */
export const commitWithoutFlush = sql`set_config('synchronous_commit', 'off', true) IS NOT NULL`;

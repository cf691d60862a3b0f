import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dbTimestamp, toDate } from "./db/rows";
import { loginFailures } from "./db/schema";
import { HttpError } from "./errors";

/**
 * The throttle of password checks, per username: `POST /auth/login` (the name as typed, trimmed;
 * known or not) and the current password of `POST /auth/password` share one count. A few
 * failures are free, then each attempt waits for a delay after the last one that doubles with
 * every failure, up to MAX_LOGIN_WAIT_MS. An attempt counts as a failure until it succeeds (the
 * count is taken before the password is checked, so attempts sent at once cannot all pass a count
 * read before any of them failed). A refused attempt is not counted: it does not push the wait
 * further. An attacker gets about a hundred guesses a day at one name, and a user locked out by
 * one waits at most MAX_LOGIN_WAIT_MS after the attacker's last attempt (or has an operator reset
 * the password, which clears the count).
 */
export const FREE_LOGIN_FAILURES = 5;
export const FIRST_LOGIN_WAIT_MS = 1000;
export const MAX_LOGIN_WAIT_MS = 15 * 60 * 1000;
/** A count whose last failure is older starts again from zero (and the sweep deletes its row). */
export const LOGIN_FAILURES_KEPT_MS = 24 * 60 * 60 * 1000;

/** How long after the last failure the next attempt may come, after `failures` failures. */
export function loginWaitMs(failures: number): number {
  if (failures < FREE_LOGIN_FAILURES) return 0;
  // The exponent's cap keeps the power finite; the wait is capped long before it.
  return Math.min(FIRST_LOGIN_WAIT_MS * 2 ** Math.min(failures - FREE_LOGIN_FAILURES, 30), MAX_LOGIN_WAIT_MS);
}

/** How long until `now` may try again (0: now), for a name's count and last failure. */
export function loginRetryAfterMs(row: { failures: number; lastFailureAt: Date } | null, now: Date): number {
  if (!row) return 0;
  return Math.max(row.lastFailureAt.getTime() + loginWaitMs(row.failures) - now.getTime(), 0);
}

/** loginWaitMs in SQL, over a count column. */
function loginWaitSql(failures: SQL): SQL {
  return sql`CASE WHEN ${failures} < ${FREE_LOGIN_FAILURES} THEN 0
    ELSE least(${FIRST_LOGIN_WAIT_MS}::float8 * power(2::float8, least(${failures} - ${FREE_LOGIN_FAILURES}, 30)), ${MAX_LOGIN_WAIT_MS}) END`;
}

/**
 * A CTE (`login_attempt`) that counts an attempt at `username` (a text expression; no attempt
 * when it is null: a user that does not exist) when the throttle allows one at `now`, returning
 * the new count; none when it does not. The statement's own read of the row (its snapshot, before
 * the CTE) says how long to wait.
 */
export function countLoginAttemptSql(username: SQL, now: string): SQL {
  const stale = sql`t.last_failure_at < ${now}::timestamptz - ${LOGIN_FAILURES_KEPT_MS} * interval '1 millisecond'`;
  return sql`login_attempt AS (
    INSERT INTO ${loginFailures} AS t (username, failures, last_failure_at)
    SELECT n.username, 1, ${now}::timestamptz FROM (SELECT (${username})::text AS username) n WHERE n.username IS NOT NULL
    ON CONFLICT (username) DO UPDATE SET failures = CASE WHEN ${stale} THEN 1 ELSE t.failures + 1 END,
      last_failure_at = excluded.last_failure_at
    WHERE ${stale} OR t.last_failure_at + ${loginWaitSql(sql`t.failures`)} * interval '1 millisecond' <= ${now}::timestamptz
    RETURNING failures)`;
}

/** The columns a statement with `login_attempt` selects for {@link requireAttemptCounted}. */
export const attemptColumns = {
  counted: z.number().nullable(),
  failures: z.number().nullable(),
  last_failure_at: dbTimestamp,
};

/** Those columns, over `f`, the name's row as the statement read it: `LEFT JOIN` {@link attemptRowSql}. */
export const attemptColumnsSql = sql`(SELECT failures FROM login_attempt) AS counted, f.failures, f.last_failure_at`;
export const attemptRowSql = (username: SQL) => sql`${loginFailures} f ON f.username = ${username}`;

/** Throws the 429 when the statement's attempt was not counted: the throttle refused it. */
export function requireAttemptCounted(
  row: { counted: number | null; failures: number | null; last_failure_at: Date | string | null },
  now: Date,
): void {
  if (row.counted !== null) return;
  // The row is there, as the statement read it before its own attempt.
  const lastFailureAt = toDate(row.last_failure_at) ?? now;
  throw tooManyLogins(loginRetryAfterMs({ failures: row.failures ?? 0, lastFailureAt }, now));
}

/** The answer to an attempt the throttle refused, with when to try again. */
export function tooManyLogins(retryAfterMs: number): HttpError {
  const seconds = Math.max(Math.ceil(retryAfterMs / 1000), 1);
  return new HttpError(
    429,
    `Too many wrong passwords for this username: try again in ${seconds} s (an operator can reset the password to clear them)`,
    { "Retry-After": String(seconds) },
  );
}

/** The sweep's step: counts whose last failure is older than LOGIN_FAILURES_KEPT_MS. */
export function staleLoginFailuresSql(now: Date): SQL {
  const cutoff = new Date(now.getTime() - LOGIN_FAILURES_KEPT_MS).toISOString();
  return sql`DELETE FROM ${loginFailures} WHERE last_failure_at < ${cutoff}::timestamptz`;
}

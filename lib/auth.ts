import { and, count, eq, inArray, type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { dummyPasswordHash, hashPassword, hashToken, newSessionToken, randomPassword, verifyPassword } from "./crypto";
import { countDeleted } from "./db/batches";
import { commitWithoutFlush } from "./db/commit";
import { dbJson, parsedRowsOf, rowsOf } from "./db/rows";
import { apiKeys, loginFailures, sessions, users } from "./db/schema";
import { compiled, type LeadingDatabase } from "./db/types";
import type { Deps } from "./deps";
import { unauthorized } from "./errors";
import { newId } from "./ids";
import {
  attemptColumns,
  attemptColumnsSql,
  attemptRowSql,
  countLoginAttemptSql,
  requireAttemptCounted,
  staleLoginFailuresSql,
} from "./login-throttle";
import type { CarriedUsage } from "./usage/backlog";
import { carriedUsageSql, returnToBacklog } from "./usage/sql";

export const SESSION_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;

const MISSING_AUTHORIZATION = "Missing or invalid Authorization header";

/**
 * The credential of an `Authorization: Bearer <credential>` header. No header, or one without the
 * Bearer scheme followed by a credential, is the spec's "Missing or invalid Authorization header".
 * Everything after the scheme (spaces and tabs around it trimmed, as HTTP allows) is the
 * credential as sent, inner spaces, control characters, "%00" and all: a wrong one is simply not
 * found, so it gets its surface's own 401 ("Invalid API key", "Invalid session"). Only its hash
 * ever reaches the database. Read in one pass each way: a pattern with a lazy credential before
 * trailing spaces backtracked quadratically, and `Bearer x`, 16,000 spaces and `y` (within
 * Node's header limit, before any authentication) held the event loop for a second.
 */
export function bearerToken(header: string | undefined | null): string {
  const scheme = header?.match(BEARER_SCHEME);
  if (!header || !scheme) throw unauthorized(MISSING_AUTHORIZATION);
  let end = header.length;
  while (end > scheme[0].length && (header[end - 1] === " " || header[end - 1] === "\t")) end--;
  if (end === scheme[0].length) throw unauthorized(MISSING_AUTHORIZATION);
  return header.slice(scheme[0].length, end);
}

/** The scheme and the spaces or tabs around it (anchored, no backtracking past them). */
const BEARER_SCHEME = /^[ \t]*Bearer[ \t]+/;

export interface ApiKeyPrincipal {
  keyId: string;
  projectId: string;
}

/**
 * One statement: find the key by hash and stamp lastUsedAt (only while it is active, and without a
 * disk flush of its own: the stamp is advisory, and on a durable host every request, reads
 * included, would otherwise pay one more flush), returning what decides the answer. Revocation is
 * therefore seen by the very next request. The same statement leads a read's work (`deferApiKey`).
 * It also writes the ledger rows other requests left waiting (lib/usage/backlog.ts), whatever
 * the key's answer, without a flush of their own either (lib/usage/sql.ts readUsageCteOf).
 */
function apiKeyStamp(keyHash: string, now: Date, carried: CarriedUsage[]): SQL {
  const carry = carried.length ? sql`WITH usage_carried AS (${carriedUsageSql(carried)}) ` : sql``;
  return sql`${carry}UPDATE ${apiKeys}
    SET last_used_at = CASE WHEN revoked_at IS NULL THEN ${now.toISOString()}::timestamptz ELSE last_used_at END
    WHERE key_hash = ${keyHash} AND ${commitWithoutFlush}
    RETURNING id AS key_id, project_id, revoked_at`;
}

/** The spec's 401s, decided from the stamp's row (none: no such key). */
export function apiKeyPrincipal(row: Record<string, unknown> | undefined): ApiKeyPrincipal {
  if (!row) throw unauthorized("Invalid API key");
  if (row.revoked_at !== null && row.revoked_at !== undefined) throw unauthorized("API key has been revoked");
  if (typeof row.project_id !== "string") throw unauthorized("API key is not linked to a project");
  return { keyId: String(row.key_id), projectId: row.project_id };
}

/** The stamp's answer, remembered for the key's next reads (lib/accepted-keys.ts): throws the 401. */
function decided(deps: Deps, keyHash: string, row: Record<string, unknown> | undefined): ApiKeyPrincipal {
  try {
    const principal = apiKeyPrincipal(row);
    deps.acceptedKeys.accepted(keyHash);
    return principal;
  } catch (err) {
    deps.acceptedKeys.refused(keyHash);
    throw err;
  }
}

export async function authenticateApiKey(deps: Deps, header: string | undefined | null): Promise<ApiKeyPrincipal> {
  const keyHash = hashToken(bearerToken(header));
  const carried = deps.usageBacklog.take();
  let rows: unknown;
  try {
    rows = await deps.db.execute(apiKeyStamp(keyHash, deps.clock.now(), carried));
  } catch (err) {
    if (carried.length === 0) throw err;
    // The request must not fail for the rows it carried: they wait again, and the key alone decides.
    returnToBacklog(deps, carried, err);
    rows = await deps.db.execute(apiKeyStamp(keyHash, deps.clock.now(), []));
  }
  return decided(deps, keyHash, rowsOf<Record<string, unknown>>(rows)[0]);
}

/** A read whose key is checked in its own round trip: see `deferApiKey`. */
export interface DeferredApiKey {
  /** The project, as SQL: the key's project while it is active, otherwise NULL (matching nothing). */
  projectId: SQL;
  /**
   * Whose ledger the read's provider calls go to, as SQL: the key's project, revoked or not (a
   * call made before the check found the key revoked was still paid for).
   */
  ledgerProjectId: SQL;
  /** This process accepted the key lately: the read's provider calls need not wait for the check. */
  acceptedLately: boolean;
  /** The key's hash: whose read it is, for what a process keeps per tenant (`ReadContext.tenant`). */
  tenant: string;
  /** The database the read must use: its first statement carries the key's check. */
  database: LeadingDatabase;
  /** The principal, once the check has run (sending it alone if no statement has); throws the 401. */
  principal(): Promise<ApiKeyPrincipal>;
}

/**
 * Authentication folded into a read's first round trip. The stamp statement leads the read's
 * first statement (on Neon in the same HTTP transaction, so a read is one round trip); the read
 * is scoped by SQL that finds the key's project itself, so it reads nothing for a key that is
 * unknown, revoked or orphaned, and the lead's row then yields the spec's exact 401 before the
 * read's result is used. The check runs on every request, so a revocation is seen by the very
 * next one; remembering keys accepted lately (lib/accepted-keys.ts) only lets their provider
 * calls go before it.
 */
export function deferApiKey(deps: Deps, header: string | undefined | null): DeferredApiKey {
  const keyHash = hashToken(bearerToken(header));
  let principal: ApiKeyPrincipal | undefined;
  const carried = deps.usageBacklog.take();
  const now = deps.clock.now();
  const database = deps.database.withLeading({
    query: compiled(apiKeyStamp(keyHash, now, carried)),
    accept: (rows) => {
      principal = decided(deps, keyHash, rows[0]);
    },
    // As for a write: the read must not fail for the rows it carried; they wait again.
    carried: carried.length
      ? { bare: compiled(apiKeyStamp(keyHash, now, [])), giveBack: (err) => returnToBacklog(deps, carried, err) }
      : undefined,
  });
  return {
    projectId: sql`(SELECT project_id FROM ${apiKeys} WHERE key_hash = ${keyHash} AND revoked_at IS NULL)`,
    ledgerProjectId: sql`(SELECT project_id FROM ${apiKeys} WHERE key_hash = ${keyHash})`,
    acceptedLately: deps.acceptedKeys.acceptedLately(keyHash),
    tenant: keyHash,
    database,
    principal: async () => {
      await database.settle();
      return principal as ApiKeyPrincipal;
    },
  };
}

export interface SessionPrincipal {
  sessionId: string;
  userId: string;
  username: string;
}

/** One statement, as for API keys; the user's name comes back through a scalar subquery. */
export async function authenticateSession(deps: Deps, header: string | undefined | null): Promise<SessionPrincipal> {
  const token = bearerToken(header);
  const now = deps.clock.now();
  const [session] = await deps.db
    .update(sessions)
    .set({
      lastUsedAt: sql`CASE WHEN ${sessions.revokedAt} IS NULL AND ${sessions.expiresAt} > ${now.toISOString()}::timestamptz THEN ${now.toISOString()}::timestamptz ELSE ${sessions.lastUsedAt} END`,
    })
    .where(and(eq(sessions.tokenHash, hashToken(token)), commitWithoutFlush))
    .returning({
      id: sessions.id,
      userId: sessions.userId,
      revokedAt: sessions.revokedAt,
      expiresAt: sessions.expiresAt,
      username: sql<string | null>`(SELECT ${users.username} FROM ${users} WHERE ${users.id} = ${sessions.userId})`,
    });
  if (!session) throw unauthorized("Invalid session");
  if (session.revokedAt) throw unauthorized("Session has been revoked");
  if (new Date(session.expiresAt).getTime() <= now.getTime()) throw unauthorized("Session has expired");
  if (!session.userId || !session.username) throw unauthorized("Session user no longer exists");
  return { sessionId: session.id, userId: session.userId, username: session.username };
}

export function userRecord(user: { id: string; username: string; createdAt: Date; updatedAt: Date }) {
  return {
    id: user.id,
    username: user.username,
    createdAt: new Date(user.createdAt).toISOString(),
    updatedAt: new Date(user.updatedAt).toISOString(),
  };
}

const LoginRow = z.object({
  ...attemptColumns,
  users: dbJson(
    z.array(
      z.object({
        id: z.string(),
        username: z.string(),
        password_hash: z.string(),
        created_at: z.string(),
        updated_at: z.string(),
      }),
    ),
  ),
});

/**
 * Unknown user and wrong password give the same 401 after the same scrypt work: the unknown
 * user is checked against a dummy hash. Usernames are stored trimmed (the dashboard, the CLI and
 * ADMIN_USERNAME trim them), so a name typed with spaces around it signs in; one stored untrimmed
 * before that still matches as typed. Throttled per name (lib/login-throttle.ts): the attempt is
 * counted, and the user read, in one statement before the password is checked; a refused attempt
 * is a 429 with `Retry-After` and costs no scrypt work.
 */
export async function login(deps: Deps, username: string, password: string) {
  const names = [...new Set([username, username.trim()])];
  const throttled = username.trim();
  const now = deps.clock.now();
  const at = now.toISOString();
  const [row] = parsedRowsOf(
    LoginRow,
    await deps.db.execute(sql`
      WITH ${countLoginAttemptSql(sql`${throttled}`, at)}
      SELECT ${attemptColumnsSql},
        (SELECT coalesce(json_agg(u), '[]'::json) FROM ${users} u WHERE ${inArray(sql`u.username`, names)}) AS users
      FROM (SELECT 1) one LEFT JOIN ${attemptRowSql(sql`${throttled}`)}`),
  );
  requireAttemptCounted(row, now);
  const user = row.users.find((u) => u.username === username) ?? row.users[0];
  const ok = await verifyPassword(password, user?.password_hash ?? (await dummyPasswordHash()));
  if (!user || !ok) throw unauthorized("Invalid username or password");
  const token = newSessionToken();
  const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS).toISOString();
  await deps.db.execute(sql`
    WITH s AS (
      INSERT INTO ${sessions} (id, token_hash, user_id, created_at, expires_at)
      VALUES (${newId("ses")}, ${hashToken(token)}, ${user.id}, ${at}::timestamptz, ${expiresAt}::timestamptz))
    DELETE FROM ${loginFailures} WHERE username = ${throttled}`);
  return {
    token,
    user: userRecord({
      id: user.id,
      username: user.username,
      createdAt: new Date(user.created_at),
      updatedAt: new Date(user.updated_at),
    }),
  };
}

export async function logout(deps: Deps, sessionId: string): Promise<void> {
  await deps.db
    .update(sessions)
    .set({ revokedAt: deps.clock.now() })
    .where(and(eq(sessions.id, sessionId), sql`${sessions.revokedAt} IS NULL`));
}

/**
 * How long a session's row outlives its expiry. Meanwhile its token still gets its own 401
 * ("Session has expired", "Session has been revoked", "Session user no longer exists"); after,
 * the sweep deletes the row and the token is an "Invalid session" like any unknown one. Without
 * it every sign-in left a row for good.
 */
export const SESSION_ROW_KEPT_MS = 30 * 24 * 60 * 60 * 1000;

/** The sweep's step: failed sign-in counts whose last failure is more than a day old (lib/login-throttle.ts). */
export function deleteStaleLoginFailures(deps: Pick<Deps, "db" | "clock">): Promise<number> {
  return countDeleted(deps.db, staleLoginFailuresSql(deps.clock.now()));
}

/** The sweep's step: sessions expired more than `SESSION_ROW_KEPT_MS` ago (revoked ones expire too), deleted. */
export async function deleteStaleSessions(deps: Pick<Deps, "db" | "clock">): Promise<number> {
  const cutoff = new Date(deps.clock.now().getTime() - SESSION_ROW_KEPT_MS);
  return countDeleted(deps.db, sql`DELETE FROM ${sessions} WHERE expires_at < ${cutoff.toISOString()}::timestamptz`);
}

/**
 * On an empty database, create the admin user. Returns the password when it was generated, so
 * the host can print it once. Safe to race: the insert is conditional on there being no user.
 */
export async function bootstrapAdmin(
  deps: Pick<Deps, "db" | "config" | "clock">,
): Promise<{ created: boolean; generatedPassword?: string }> {
  const [{ n }] = await deps.db.select({ n: count() }).from(users);
  if (n > 0) return { created: false };
  const generated = deps.config.adminPassword ? undefined : randomPassword();
  const password = deps.config.adminPassword ?? (generated as string);
  const now = deps.clock.now();
  const inserted = await deps.db.execute(sql`
    INSERT INTO ${users} (id, username, password_hash, created_at, updated_at)
    SELECT ${newId("usr")}, ${deps.config.adminUsername}, ${await hashPassword(password)}, ${now.toISOString()}::timestamptz, ${now.toISOString()}::timestamptz
    WHERE NOT EXISTS (SELECT 1 FROM ${users})
    ON CONFLICT DO NOTHING
    RETURNING id`);
  const created = ((inserted as { rows?: unknown[] }).rows ?? (inserted as unknown[])).length > 0;
  return created ? { created, generatedPassword: generated } : { created: false };
}

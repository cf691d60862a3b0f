import { and, desc, eq, type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { userRecord } from "./auth";
import { hashPassword, verifyPassword } from "./crypto";
import { pageWithTotal } from "./db/paging";
import { dbInt, dbTimestampSet, parsedRowsOf } from "./db/rows";
import { loginFailures, sessions, users } from "./db/schema";
import type { DbDeps, Deps } from "./deps";
import { badRequest, conflict, notFound } from "./errors";
import { newId } from "./ids";
import {
  attemptColumns,
  attemptColumnsSql,
  attemptRowSql,
  countLoginAttemptSql,
  requireAttemptCounted,
} from "./login-throttle";

/** Dashboard users, newest first (as projects and keys are listed): a new one is on the first page. */
export async function listUsers(deps: DbDeps, page: { limit: number; offset: number }) {
  const { rows, total } = await pageWithTotal(deps.db, users, undefined, [desc(users.createdAt), desc(users.id)], page);
  return { users: rows.map(userRecord), total };
}

export async function createUser(deps: DbDeps, input: { username: string; password: string }) {
  const now = deps.clock.now();
  const [user] = await deps.db
    .insert(users)
    .values({
      id: newId("usr"),
      username: input.username,
      passwordHash: await hashPassword(input.password),
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoNothing({ target: users.username })
    .returning();
  if (!user) throw conflict("Username already taken");
  return userRecord(user);
}

/**
 * Deletes a user unless it is the caller or the last one. The "last user" guard is part of the
 * DELETE itself, and it counts the users while locking them (FOR UPDATE): under READ COMMITTED a
 * plain count would let two operators deleting each other at once both see two users and empty
 * the table; with the lock the second delete waits, recounts without the deleted row and stops.
 */
export async function deleteUser(
  deps: Deps,
  { actingUserId, userId: id }: { actingUserId: string; userId: string },
): Promise<void> {
  if (id === actingUserId) throw badRequest("You cannot delete your own account");
  const deleted = await deps.db
    .delete(users)
    .where(sql`${users.id} = ${id} AND (SELECT count(*) FROM (SELECT 1 FROM ${users} FOR UPDATE) AS locked_users) > 1`)
    .returning({ id: users.id });
  if (deleted.length > 0) return;
  const [exists] = await deps.db.select({ id: users.id }).from(users).where(eq(users.id, id));
  if (!exists) throw notFound("User not found");
  throw badRequest("Cannot delete the last user");
}

const ChangedUser = z.object({
  id: z.string(),
  username: z.string(),
  created_at: dbTimestampSet,
  updated_at: dbTimestampSet,
  sessions_revoked: dbInt,
});

/**
 * One statement: the password of the user `where` picks, and every session of theirs ended but
 * `keepSessionId` (a password changed because it leaked must not leave the thief signed in).
 * Undefined when `where` picks no user.
 */
async function setPassword(deps: DbDeps, where: SQL, password: string, keepSessionId?: string) {
  const now = deps.clock.now().toISOString();
  const [row] = parsedRowsOf(
    ChangedUser,
    await deps.db.execute(sql`
      WITH changed AS (
        UPDATE ${users} SET password_hash = ${await hashPassword(password)}, updated_at = ${now}::timestamptz
        WHERE ${where}
        RETURNING id, username, created_at, updated_at
      ), revoked AS (
        UPDATE ${sessions} SET revoked_at = ${now}::timestamptz
        WHERE user_id IN (SELECT id FROM changed) AND revoked_at IS NULL AND id IS DISTINCT FROM ${keepSessionId ?? null}
        RETURNING id
      ), unthrottled AS (
        -- A new password ends a lockout of the name's sign-ins (lib/login-throttle.ts).
        DELETE FROM ${loginFailures} WHERE username IN (SELECT username FROM changed)
      )
      SELECT changed.*, (SELECT count(*) FROM revoked)::int AS sessions_revoked FROM changed`),
  );
  if (!row) return undefined;
  const user = userRecord({
    id: row.id,
    username: row.username,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  });
  return { user, sessionsRevoked: row.sessions_revoked };
}

/** An operator sets a user's password (the admin command line); every session of theirs ends. */
export async function resetPassword(deps: DbDeps, { username, password }: { username: string; password: string }) {
  const changed = await setPassword(deps, eq(users.username, username), password);
  if (!changed) throw notFound(`User "${username}" not found`);
  return changed;
}

const ChangingUser = z.object({
  ...attemptColumns,
  username: z.string().nullable(),
  password_hash: z.string().nullable(),
});

/**
 * A signed-in user changes their own password, proving the current one. Their other sessions
 * end; the one asking stays signed in. The update applies only while the hash is still the one
 * checked, so of two changes racing each other the second fails rather than undoing the first.
 * The check of the current password is throttled with the name's sign-ins (lib/login-throttle.ts):
 * a stolen session cannot guess the password faster than the sign-in form can.
 */
export async function changePassword(
  deps: DbDeps,
  input: { userId: string; sessionId: string; currentPassword: string; newPassword: string },
) {
  const now = deps.clock.now();
  const [user] = parsedRowsOf(
    ChangingUser,
    await deps.db.execute(sql`
      WITH u AS (SELECT username, password_hash FROM ${users} WHERE id = ${input.userId}),
      ${countLoginAttemptSql(sql`(SELECT username FROM u)`, now.toISOString())}
      SELECT ${attemptColumnsSql}, u.username, u.password_hash
      FROM (SELECT 1) one LEFT JOIN u ON true LEFT JOIN ${attemptRowSql(sql`u.username`)}`),
  );
  // No row in `u`: its columns are null (and no attempt was counted).
  if (!user?.username || !user.password_hash) throw notFound("User not found");
  requireAttemptCounted(user, now);
  if (!(await verifyPassword(input.currentPassword, user.password_hash))) {
    throw badRequest("Current password is incorrect");
  }
  const changed = await setPassword(
    deps,
    and(eq(users.id, input.userId), eq(users.passwordHash, user.password_hash)) as SQL,
    input.newPassword,
    input.sessionId,
  );
  if (!changed) throw conflict("The password was changed meanwhile: sign in again with the new one");
  return changed;
}

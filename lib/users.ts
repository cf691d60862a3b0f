import { eq, sql } from "drizzle-orm";
import { userRecord } from "./auth";
import { hashPassword } from "./crypto";
import { pageWithTotal } from "./db/paging";
import { users } from "./db/schema";
import type { Deps } from "./deps";
import { badRequest, conflict, notFound } from "./errors";
import { newId } from "./ids";

export async function listUsers(deps: Deps, page: { limit: number; offset: number }) {
  const { rows, total } = await pageWithTotal(
    deps.db,
    users,
    undefined,
    [sql`${users.createdAt}`, sql`${users.id}`],
    page,
  );
  return { users: rows.map(userRecord), total };
}

export async function createUser(deps: Deps, input: { username: string; password: string }) {
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

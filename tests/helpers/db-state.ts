import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { SESSION_LIFETIME_MS } from "../../lib/auth";
import { hashToken } from "../../lib/crypto";
import { sessions } from "../../lib/db/schema";
import type { Db } from "../../lib/db/types";
import { newId } from "../../lib/ids";

/** Every table a request could write to. */
export const TABLES = [
  "threads",
  "messages",
  "episodes",
  "facts",
  "entities",
  "fact_entities",
  "jobs",
  "api_keys",
  "projects",
  "users",
  "sessions",
] as const;
export type TableCounts = Record<(typeof TABLES)[number], number>;

const COUNTS = sql.raw(`SELECT ${TABLES.map((t) => `(SELECT count(*) FROM ${t})::int AS ${t}`).join(", ")}`);

/** Row counts of every table in one statement: "nothing was written" is counts before = after. */
export async function tableCounts(db: Db): Promise<TableCounts> {
  const result = await db.execute(COUNTS);
  const rows = ((result as { rows?: unknown[] }).rows ?? (result as unknown[])) as TableCounts[];
  return { ...rows[0] };
}

/** A session for `userId` inserted directly (no scrypt): for calls that end their session. */
export async function insertSession(db: Db, userId: string, now: Date): Promise<string> {
  const token = `mk_sess_${randomBytes(32).toString("base64url")}`;
  await db.insert(sessions).values({
    id: newId("ses"),
    tokenHash: hashToken(token),
    userId,
    createdAt: now,
    expiresAt: new Date(now.getTime() + SESSION_LIFETIME_MS),
  });
  return token;
}

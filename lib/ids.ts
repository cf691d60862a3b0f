import { randomBytes } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";

/**
 * Every kind of id the service makes, by its prefix. Ids are opaque to clients; the prefix tells a
 * reader what an id names (a webhook delivery's `whd_…` is not a chat message's `msg_…`).
 */
export const ID_PREFIXES = {
  project: "prj",
  user: "usr",
  session: "ses",
  apiKey: "key",
  thread: "thr",
  message: "msg",
  episode: "epi",
  fact: "fct",
  entity: "ent",
  job: "job",
  webhookEndpoint: "whk",
  webhookDelivery: "whd",
  webhookAttempt: "wha",
} as const;
export type IdPrefix = (typeof ID_PREFIXES)[keyof typeof ID_PREFIXES];

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Prefixed, URL-safe random id such as `thr_4k2j...` (20 characters of base36, ~103 bits). */
export function newId(prefix: IdPrefix): string {
  const bytes = randomBytes(20);
  let out = "";
  for (const b of bytes) out += ALPHABET[b % 36];
  return `${prefix}_${out}`;
}

/**
 * The same inside a statement, for rows a statement makes itself (one per row of a SELECT): the
 * prefix, then a random UUID's 32 hex digits. The prefix is written inline (a constant of the
 * table above), so the statement's text, and its prepared plan, stay the same from call to call.
 */
export function newIdSql(prefix: IdPrefix): SQL {
  return sql.raw(`'${prefix}_' || replace(gen_random_uuid()::text, '-', '')`);
}

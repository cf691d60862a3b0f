import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Prefixed, URL-safe random id such as `thr_4k2j...` (20 characters of base36, ~103 bits). */
export function newId(prefix: "prj" | "usr" | "ses" | "key" | "thr" | "msg" | "epi" | "fct" | "ent" | "job") {
  const bytes = randomBytes(20);
  let out = "";
  for (const b of bytes) out += ALPHABET[b % 36];
  return `${prefix}_${out}`;
}

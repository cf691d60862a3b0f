import { createHash, randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/** Fixed prefix of every credential this service issues (3 characters, as the spec requires). */
export const KEY_PREFIX = "mk_";
export const SESSION_PREFIX = `${KEY_PREFIX}sess_`;

/** API key: the 3-character prefix then 32 random bytes as 64 hex characters (67 in all). */
export function newApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString("hex");
}

export function newSessionToken(): string {
  return SESSION_PREFIX + randomBytes(32).toString("base64url");
}

/**
 * Credentials are 256-bit random strings, so a single SHA-256 is a sufficient one-way hash
 * (no dictionary to attack) and lets the lookup be an indexed equality in one statement.
 */
export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** A whole API key: the prefix and 64 hex digits. */
export const FULL_KEY = new RegExp(`^${KEY_PREFIX}[0-9a-f]{64}$`);

/**
 * A preview's head: the prefix and the four characters after it. It is also the shortest start of
 * a preview that names a key.
 */
const PREVIEW_HEAD = KEY_PREFIX.length + 4;

/**
 * Why `ref` cannot name a key, or null: an id, the key, or at least `mk_` and four characters of
 * a preview. A shorter start (an empty or unset shell variable, "mk") matched every key, and
 * where there was one it was revoked.
 */
export function keyRefProblem(ref: string): string | null {
  if (ref.startsWith("key_") || FULL_KEY.test(ref)) return null;
  if (ref.startsWith(KEY_PREFIX) && ref.length >= PREVIEW_HEAD) return null;
  return `give the key's id (key_...), the key, or at least the first ${PREVIEW_HEAD} characters of its preview (${KEY_PREFIX}1a2b)`;
}

/** What a key looks like in listings: the prefix and the last four characters. */
export function keyPreview(key: string): string {
  return `${key.slice(0, PREVIEW_HEAD)}...${key.slice(-4)}`;
}

// scrypt parameters (N=2^14, r=8, p=1: OWASP's minimum for scrypt), stored with each hash so
// they can be raised later without invalidating existing passwords.
const SCRYPT = { N: 16384, r: 8, p: 1, keyLength: 64 } as const;

function scryptAsync(password: string, salt: Buffer, N: number, r: number, p: number, keyLength: number) {
  return new Promise<Buffer>((resolve, reject) => {
    scrypt(password, salt, keyLength, { N, r, p, maxmem: 64 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** `scrypt$N$r$p$<salt b64>$<hash b64>` */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const { N, r, p, keyLength } = SCRYPT;
  const hash = await scryptAsync(password, salt, N, r, p, keyLength);
  return ["scrypt", N, r, p, salt.toString("base64"), hash.toString("base64")].join("$");
}

// A hash of a random password, verified against when the user does not exist, so an unknown
// username costs the same scrypt work as a wrong password.
let dummyHash: Promise<string> | undefined;
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword(randomBytes(16).toString("hex"));
  return dummyHash;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, saltB64, hashB64] = stored.split("$");
  if (scheme !== "scrypt" || !saltB64 || !hashB64) return false;
  const expected = Buffer.from(hashB64, "base64");
  const actual = await scryptAsync(
    password,
    Buffer.from(saltB64, "base64"),
    Number(n),
    Number(r),
    Number(p),
    expected.length,
  );
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export function randomPassword(): string {
  return randomBytes(18).toString("base64url");
}

import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { expect } from "vitest";
import { revokeApiKey } from "../../lib/api-keys";
import { login, SESSION_LIFETIME_MS } from "../../lib/auth";
import { hashPassword } from "../../lib/crypto";
import { apiKeys, users } from "../../lib/db/schema";
import { newId } from "../../lib/ids";
import { deleteUser } from "../../lib/users";
import { ADMIN, newTenant, type TestService } from "./service";

export const MISSING = "Missing or invalid Authorization header";

/** One credential case: the whole Authorization header (undefined: none) and its 401 message. */
export interface CredentialCase {
  name: string;
  header: string | undefined;
  message: string;
}

/**
 * Live, dead and foreign credentials of both surfaces, made once for a suite on a service with a
 * manual clock (`createTestService({ manualTime: true })`): a live key and session, a revoked and
 * an orphaned key, and an expired, a logged-out and a deleted user's session. The expired session
 * is checked at its boundary: valid 1 ms before the 7-day lifetime, expired 1 ms after. The clock
 * moves 7 days here, so every other session is made after it moved.
 */
export async function makeCredentials(svc: TestService, prefix: string) {
  const clock = svc.clock as NonNullable<TestService["clock"]>;
  const tenant = await newTenant(svc, prefix);
  const revokedKey = await newTenant(svc, `${prefix}-revoked`);
  await revokeApiKey(svc.deps, { apiKeyId: revokedKey.keyId });
  const orphanKey = await newTenant(svc, `${prefix}-orphan`);
  await svc.deps.db.update(apiKeys).set({ projectId: null }).where(eq(apiKeys.id, orphanKey.keyId));

  const signIn = async (username = ADMIN.username, password = ADMIN.password) =>
    (await login(svc.deps, username, password)).token;
  const me = async (token: string) => (await svc.request("/auth/me", { token })).status;

  const expiredSession = await signIn();
  clock.advance(SESSION_LIFETIME_MS - 1);
  expect(await me(expiredSession)).toBe(200);
  clock.advance(2);
  expect(await me(expiredSession)).toBe(401);

  const loggedOutSession = await signIn();
  expect((await svc.request("/auth/logout", { method: "POST", token: loggedOutSession })).status).toBe(204);
  const gone = { id: newId("usr"), username: `gone-${randomUUID().slice(0, 8)}`, password: "gone-password" };
  await svc.deps.db.insert(users).values({
    id: gone.id,
    username: gone.username,
    passwordHash: await hashPassword(gone.password),
    createdAt: clock.now(),
    updatedAt: clock.now(),
  });
  const orphanSession = await signIn(gone.username, gone.password);
  const [admin] = await svc.deps.db.select().from(users).where(eq(users.username, ADMIN.username));
  await deleteUser(svc.deps, { actingUserId: admin.id, userId: gone.id });
  const session = await signIn();
  return { tenant, revokedKey, orphanKey, expiredSession, loggedOutSession, orphanSession, session, admin };
}

export type Credentials = Awaited<ReturnType<typeof makeCredentials>>;

/** The dead and foreign credentials for a route of `surface`, each with the message it must get. */
export function deadCredentials(c: Credentials, surface: "apiKey" | "session"): CredentialCase[] {
  const onV1 = surface === "apiKey";
  const dead = (name: string, token: string, v1: string, dashboard: string): CredentialCase => ({
    name,
    header: `Bearer ${token}`,
    message: onV1 ? v1 : dashboard,
  });
  return [
    dead("revoked API key", c.revokedKey.key, "API key has been revoked", "Invalid session"),
    dead("orphaned API key", c.orphanKey.key, "API key is not linked to a project", "Invalid session"),
    dead("live API key", c.tenant.key, "(authenticates)", "Invalid session"),
    dead("expired session", c.expiredSession, "Invalid API key", "Session has expired"),
    dead("logged-out session", c.loggedOutSession, "Invalid API key", "Session has been revoked"),
    dead("deleted user's session", c.orphanSession, "Invalid API key", "Session user no longer exists"),
    dead("live session", c.session, "Invalid API key", "(authenticates)"),
  ].filter((d) => d.message !== "(authenticates)");
}

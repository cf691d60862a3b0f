import { randomBytes, randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SESSION_LIFETIME_MS, SESSION_ROW_KEPT_MS } from "../../lib/auth";
import { hashToken } from "../../lib/crypto";
import { apiKeys, loginFailures, sessions, users } from "../../lib/db/schema";
import { sweep } from "../../lib/jobs/runner";
import { FREE_LOGIN_FAILURES, LOGIN_FAILURES_KEPT_MS } from "../../lib/login-throttle";
import { createUser, resetPassword } from "../../lib/users";
import type { ApiSchema, Body } from "../helpers/api-types";
import { ADMIN, adminSession, createTestService, newTenant, type TestService } from "../helpers/service";

// One embedded database for the file, with a manual clock. Every test makes its own sessions,
// users, projects and keys inside the test, so moving the clock in one test cannot expire a
// credential another test relies on.
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService({ manualTime: true });
});
afterAll(() => svc.close());

type UserRecord = ApiSchema<"DashboardUser">;
type LoginBody = Body<"/auth/login", "post", 200>;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const uniqueName = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

async function loginRes(username: string, password: string) {
  return svc.request("/auth/login", { method: "POST", json: { username, password } });
}

async function loginAs(username: string, password: string): Promise<string> {
  const res = await loginRes(username, password);
  expect(res.status).toBe(200);
  return ((await res.json()) as LoginBody).token;
}

/** A second dashboard user, created through the API by the admin. */
async function newUser(adminToken: string) {
  const username = uniqueName("user");
  const password = "secret-password";
  const res = await svc.request("/dashboard/users", {
    method: "POST",
    token: adminToken,
    json: { username, password },
  });
  expect(res.status).toBe(201);
  const { user } = (await res.json()) as { user: UserRecord };
  return { ...user, password };
}

async function sessionRow(token: string) {
  const [row] = await svc.deps.db
    .select()
    .from(sessions)
    .where(eq(sessions.tokenHash, hashToken(token)));
  return row;
}

async function expect401(res: Response, message: string) {
  expect(res.status).toBe(401);
  expect(await res.json()).toEqual({ error: message });
}

const me = (token?: string, headers?: Record<string, string>) => svc.request("/auth/me", { token, headers });

describe("POST /auth/login", () => {
  it("returns a session token and the user record", async () => {
    const res = await loginRes(ADMIN.username, ADMIN.password);
    expect(res.status).toBe(200);
    const body = (await res.json()) as LoginBody;
    expect(Object.keys(body).sort()).toEqual(["token", "user"]);
    expect(body.token).toMatch(/^mk_sess_[A-Za-z0-9_-]{20,}$/);
    expect(Object.keys(body.user).sort()).toEqual(["createdAt", "id", "updatedAt", "username"]);
    expect(body.user.username).toBe(ADMIN.username);
    expect(body.user.createdAt).toMatch(ISO);
    expect(body.user.updatedAt).toMatch(ISO);
    const [row] = await svc.deps.db.select().from(users).where(eq(users.username, ADMIN.username));
    expect(body.user.id).toBe(row.id);
    // The token works at once.
    expect((await me(body.token)).status).toBe(200);
  });

  it("issues a different token on every login, stored only as a hash", async () => {
    const a = await loginAs(ADMIN.username, ADMIN.password);
    const b = await loginAs(ADMIN.username, ADMIN.password);
    expect(a).not.toBe(b);
    const row = await sessionRow(a);
    expect(row).toBeDefined();
    expect(row.tokenHash).not.toBe(a);
    expect(JSON.stringify(row)).not.toContain(a);
    expect(new Date(row.expiresAt).getTime() - new Date(row.createdAt).getTime()).toBe(7 * 24 * 60 * 60 * 1000);
  });

  it("answers an unknown user and a wrong password with the same 401", async () => {
    // Failed sign-ins are counted per name (the throttle below): not the admin's, which others use.
    const user = await createUser(svc.deps, { username: uniqueName("Wrong"), password: "secret-password" });
    const unknown = await loginRes(uniqueName("nobody"), "secret-password");
    await expect401(unknown, "Invalid username or password");
    const wrong = await loginRes(user.username, "secret-passwordx");
    await expect401(wrong, "Invalid username or password");
    // The username is matched exactly.
    await expect401(await loginRes(user.username.toUpperCase(), "secret-password"), "Invalid username or password");
  });

  it("spends the same scrypt work on an unknown user as on a wrong password", async () => {
    const user = await createUser(svc.deps, { username: uniqueName("scrypt"), password: "secret-password" });
    const time = async (username: string) => {
      const started = performance.now();
      const res = await loginRes(username, "not-the-password");
      expect(res.status).toBe(401);
      return performance.now() - started;
    };
    // Warm up (the dummy hash is computed once, lazily).
    await time(uniqueName("nobody"));
    await time(user.username);
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < 3; i++) {
      unknown.push(await time(uniqueName("nobody")));
      wrong.push(await time(user.username));
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[1];
    // Without the dummy hash an unknown user answers in ~1 ms against ~50 ms of scrypt.
    expect(median(unknown)).toBeGreaterThan(median(wrong) * 0.3);
  });

  it("rejects a body without username or password with 400", async () => {
    const res = await svc.request("/auth/login", { method: "POST", json: { username: ADMIN.username } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; issues: { path: unknown[] }[] };
    expect(body.error).toBe("Validation error");
    expect(body.issues.map((i) => i.path)).toContainEqual(["password"]);
  });

  it("rejects a NUL character in the username with 400 rather than a database error", async () => {
    const res = await loginRes("ad\u0000min", ADMIN.password);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; issues: { path: unknown[] }[] };
    expect(body.error).toBe("Validation error");
    expect(body.issues.map((i) => i.path)).toContainEqual(["username"]);
  });

  it("lets a newly created user sign in with their password only", async () => {
    const admin = await adminSession(svc);
    const user = await newUser(admin);
    const res = await loginRes(user.username, user.password);
    expect(res.status).toBe(200);
    const body = (await res.json()) as LoginBody;
    expect(body.user).toEqual({
      id: user.id,
      username: user.username,
      createdAt: user.createdAt,
      updatedAt: user.updatedAt,
    });
    await expect401(await loginRes(user.username, ADMIN.password), "Invalid username or password");
  });

  it("stores a username trimmed, refuses a blank one, and signs in a name typed with spaces around it", async () => {
    const admin = await adminSession(svc);
    const name = uniqueName("spaced");
    const create = (username: string) =>
      svc.request("/dashboard/users", {
        method: "POST",
        token: admin,
        json: { username, password: "secret-password" },
      });
    const res = await create(`  ${name}\t`);
    expect(res.status).toBe(201);
    expect(((await res.json()) as { user: UserRecord }).user.username).toBe(name);
    const blank = await create("   ");
    expect(blank.status).toBe(400);
    expect(await blank.json()).toMatchObject({ error: "Validation error", issues: [{ path: ["username"] }] });
    // The trimmed name is the same user: a second one of that name is taken.
    expect((await create(name)).status).toBe(409);
    expect(((await (await loginRes(` ${name} `, "secret-password")).json()) as LoginBody).user.username).toBe(name);
    await expect401(await loginRes(` ${name} `, "wrong-password"), "Invalid username or password");
  });

  it("still signs in a user stored with spaces around the name (before names were trimmed), as typed", async () => {
    const name = ` ${uniqueName("legacy")} `;
    expect((await createUser(svc.deps, { username: name, password: "secret-password" })).username).toBe(name);
    expect(((await (await loginRes(name, "secret-password")).json()) as LoginBody).user.username).toBe(name);
  });
});

describe("the sign-in throttle", () => {
  const failures = async (username: string) =>
    (await svc.deps.db.select().from(loginFailures).where(eq(loginFailures.username, username)))[0]?.failures;

  async function expect429(res: Response, seconds: number) {
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe(String(seconds));
    expect(await res.json()).toEqual({
      error: `Too many wrong passwords for this username: try again in ${seconds} s (an operator can reset the password to clear them)`,
    });
  }

  it("refuses a name's attempts after five failures, the right password too, for a wait that doubles; a success clears it", async () => {
    const user = await createUser(svc.deps, { username: uniqueName("guessed"), password: "secret-password" });
    for (let i = 0; i < FREE_LOGIN_FAILURES; i++) {
      await expect401(await loginRes(user.username, `wrong-${i}`), "Invalid username or password");
    }
    await expect429(await loginRes(user.username, "secret-password"), 1);
    // A refused attempt is not counted: it does not push the wait further.
    await expect429(await loginRes(` ${user.username} `, "secret-password"), 1);
    expect(await failures(user.username)).toBe(5);

    svc.clock!.advance(1000);
    await expect401(await loginRes(user.username, "wrong-again"), "Invalid username or password");
    await expect429(await loginRes(user.username, "secret-password"), 2);
    svc.clock!.advance(1999);
    await expect429(await loginRes(user.username, "secret-password"), 1);
    svc.clock!.advance(1);
    expect((await loginRes(user.username, "secret-password")).status).toBe(200);
    expect(await failures(user.username)).toBeUndefined();
    // Another name was never held back.
    expect((await loginRes(ADMIN.username, ADMIN.password)).status).toBe(200);
  });

  it("counts attempts sent at once before checking any password, for names that do not exist too", async () => {
    const name = uniqueName("sprayed");
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => loginRes(name, `guess-${i}`)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(5).fill(401), ...Array(5).fill(429)]);
    expect(await failures(name)).toBe(5);
  });

  it("is cleared by a new password, and forgotten by the sweep a day after the last failure", async () => {
    const user = await createUser(svc.deps, { username: uniqueName("locked"), password: "secret-password" });
    for (let i = 0; i < 6; i++) await loginRes(user.username, `wrong-${i}`);
    await expect429(await loginRes(user.username, "secret-password"), 1);
    await resetPassword(svc.deps, { username: user.username, password: "new-password" });
    expect((await loginRes(user.username, "new-password")).status).toBe(200);

    const name = uniqueName("forgotten");
    await loginRes(name, "guess");
    svc.clock!.advance(LOGIN_FAILURES_KEPT_MS);
    await sweep(svc.deps);
    expect(await failures(name)).toBe(1);
    svc.clock!.advance(1);
    expect((await sweep(svc.deps)).staleLoginFailures).toBeGreaterThanOrEqual(1);
    expect(await failures(name)).toBeUndefined();
  });
});

describe("GET /auth/me", () => {
  it("returns the signed-in user as {user: {userId, username}}", async () => {
    const admin = await adminSession(svc);
    const user = await newUser(admin);
    const token = await loginAs(user.username, user.password);
    const res = await me(token);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ user: { userId: user.id, username: user.username } });
  });
});

describe("POST /auth/logout", () => {
  it("revokes the session at once and only that session", async () => {
    const token = await adminSession(svc);
    const other = await adminSession(svc);
    const res = await svc.request("/auth/logout", { method: "POST", token });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    await expect401(await me(token), "Session has been revoked");
    await expect401(await svc.request("/dashboard/projects", { token }), "Session has been revoked");
    // Logging out twice is a revoked credential, not a success.
    await expect401(await svc.request("/auth/logout", { method: "POST", token }), "Session has been revoked");
    expect((await sessionRow(token)).revokedAt).not.toBeNull();
    // Another session of the same user is untouched.
    expect((await me(other)).status).toBe(200);
  });

  it("needs a session", async () => {
    await expect401(await svc.request("/auth/logout", { method: "POST" }), "Missing or invalid Authorization header");
  });
});

describe("session lifetime", () => {
  it("works until just under 7 days after login, then answers Session has expired", async () => {
    const token = await adminSession(svc);
    svc.clock!.advance(SESSION_LIFETIME_MS - 1);
    expect((await me(token)).status).toBe(200);
    svc.clock!.advance(1);
    await expect401(await me(token), "Session has expired");
    await expect401(await svc.request("/dashboard/users", { token }), "Session has expired");
    // Use does not extend the lifetime: a fresh login is needed.
    expect((await me(await adminSession(svc))).status).toBe(200);
  });

  it("is fixed at 7 days from creation even when used every day", async () => {
    const token = await adminSession(svc);
    for (let day = 1; day < 7; day++) {
      svc.clock!.advance(24 * 60 * 60 * 1000);
      expect((await me(token)).status).toBe(200);
    }
    svc.clock!.advance(24 * 60 * 60 * 1000);
    await expect401(await me(token), "Session has expired");
  });

  it("keeps an expired or revoked session's answer for 30 days past its expiry; then the sweep deletes its row", async () => {
    const expiring = await adminSession(svc);
    const revoked = await adminSession(svc);
    expect((await svc.request("/auth/logout", { method: "POST", token: revoked })).status).toBe(204);
    svc.clock!.advance(SESSION_LIFETIME_MS + SESSION_ROW_KEPT_MS);
    // Exactly at the end of the 30 days: kept, each with its own answer.
    await sweep(svc.deps);
    await expect401(await me(expiring), "Session has expired");
    await expect401(await me(revoked), "Session has been revoked");
    const fresh = await adminSession(svc);

    svc.clock!.advance(1);
    expect((await sweep(svc.deps)).staleSessions).toBeGreaterThanOrEqual(2);
    await expect401(await me(expiring), "Invalid session");
    await expect401(await me(revoked), "Invalid session");
    expect(
      await svc.deps.db
        .select()
        .from(sessions)
        .where(eq(sessions.tokenHash, hashToken(expiring))),
    ).toEqual([]);
    // A session still in its lifetime is untouched.
    expect((await me(fresh)).status).toBe(200);
  });

  it("stamps lastUsedAt on every authenticated request", async () => {
    const token = await adminSession(svc);
    expect((await sessionRow(token)).lastUsedAt).toBeNull();
    expect((await me(token)).status).toBe(200);
    const first = svc.clock!.now();
    expect(new Date((await sessionRow(token)).lastUsedAt!).toISOString()).toBe(first.toISOString());
    svc.clock!.advance(60_000);
    expect((await svc.request("/dashboard/projects", { token })).status).toBe(200);
    expect(new Date((await sessionRow(token)).lastUsedAt!).toISOString()).toBe(svc.clock!.now().toISOString());
  });

  it("answers Session user no longer exists once the user is deleted", async () => {
    const admin = await adminSession(svc);
    const user = await newUser(admin);
    const token = await loginAs(user.username, user.password);
    expect((await me(token)).status).toBe(200);
    const del = await svc.request(`/dashboard/users/${user.id}`, { method: "DELETE", token: admin });
    expect(del.status).toBe(204);
    await expect401(await me(token), "Session user no longer exists");
    await expect401(await svc.request("/dashboard/projects", { token }), "Session user no longer exists");
    // The session row is kept (so the answer stays specific), detached from any user.
    expect((await sessionRow(token)).userId).toBeNull();
    // And the user cannot sign in again.
    await expect401(await loginRes(user.username, user.password), "Invalid username or password");
  });
});

describe("401 messages", () => {
  const surfaces = [
    { name: "/v1", path: "/v1/threads/thr_missing" },
    { name: "/dashboard", path: "/dashboard/projects" },
    { name: "/auth", path: "/auth/me" },
  ];

  for (const surface of surfaces) {
    it(`${surface.name}: Missing or invalid Authorization header`, async () => {
      const t = await newTenant(svc);
      const session = await adminSession(svc);
      const malformed: (Record<string, string> | undefined)[] = [
        undefined,
        { authorization: "" },
        { authorization: "Basic xyz" },
        { authorization: `Basic ${t.key}` },
        { authorization: "Bearer" },
        { authorization: "Bearer " },
        { authorization: `Token ${session}` },
        { authorization: t.key },
      ];
      for (const headers of malformed) {
        await expect401(await svc.request(surface.path, { headers }), "Missing or invalid Authorization header");
      }
      // A Bearer header is not malformed because its credential is: two tokens in one is an
      // unknown credential.
      await expect401(
        await svc.request(surface.path, { headers: { authorization: `Bearer ${t.key} ${session}` } }),
        surface.name === "/v1" ? "Invalid API key" : "Invalid session",
      );
    });
  }

  it("/v1: Invalid API key for an unknown key, a session token or garbage", async () => {
    const session = await adminSession(svc);
    for (const token of [`mk_${randomBytes(32).toString("hex")}`, session, "not-a-key"]) {
      await expect401(
        await svc.request("/v1/threads", { method: "POST", token, json: { dataset: "d" } }),
        "Invalid API key",
      );
    }
  });

  it("/v1: API key has been revoked, from the very next request", async () => {
    const admin = await adminSession(svc);
    const t = await newTenant(svc);
    const created = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "d" } });
    expect(created.status).toBe(201);
    const { threadId } = (await created.json()) as { threadId: string };
    const revoke = await svc.request(`/dashboard/api-keys/${t.keyId}`, { method: "DELETE", token: admin });
    expect(revoke.status).toBe(200);
    await expect401(await svc.request(`/v1/threads/${threadId}`, { token: t.key }), "API key has been revoked");
    await expect401(
      await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "d" } }),
      "API key has been revoked",
    );
    // Permanent: time passing changes nothing.
    svc.clock!.advance(30 * 24 * 60 * 60 * 1000);
    await expect401(await svc.request(`/v1/threads/${threadId}`, { token: t.key }), "API key has been revoked");
  });

  it("/v1: API key is not linked to a project", async () => {
    const t = await newTenant(svc);
    expect((await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "d" } })).status).toBe(
      201,
    );
    await svc.deps.db.update(apiKeys).set({ projectId: null }).where(eq(apiKeys.id, t.keyId));
    await expect401(
      await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "d" } }),
      "API key is not linked to a project",
    );
  });

  it("/dashboard and /auth: Invalid session for an unknown token, an API key or garbage", async () => {
    const t = await newTenant(svc);
    for (const token of [`mk_sess_${randomBytes(32).toString("base64url")}`, t.key, "garbage"]) {
      await expect401(await svc.request("/dashboard/projects", { token }), "Invalid session");
      await expect401(await me(token), "Invalid session");
      await expect401(await svc.request("/auth/logout", { method: "POST", token }), "Invalid session");
    }
  });

  it("never lets the two credentials cross", async () => {
    const t = await newTenant(svc);
    const session = await adminSession(svc);
    // Each credential works on its own surface...
    expect((await svc.request("/dashboard/projects", { token: session })).status).toBe(200);
    expect((await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "d" } })).status).toBe(
      201,
    );
    // ...and is unknown on the other one.
    await expect401(
      await svc.request("/v1/threads", { method: "POST", token: session, json: { dataset: "d" } }),
      "Invalid API key",
    );
    await expect401(await svc.request("/dashboard/projects", { token: t.key }), "Invalid session");
    await expect401(
      await svc.request("/dashboard/api-keys", {
        method: "POST",
        token: t.key,
        json: { name: "x", projectId: t.projectId },
      }),
      "Invalid session",
    );
  });

  it("checks the credential before the body: no credential and a bad body is 401, not 400", async () => {
    await expect401(
      await svc.request("/dashboard/users", { method: "POST", json: { username: "" } }),
      "Missing or invalid Authorization header",
    );
    await expect401(
      await svc.request("/v1/threads", { method: "POST", json: { nope: true } }),
      "Missing or invalid Authorization header",
    );
  });
});

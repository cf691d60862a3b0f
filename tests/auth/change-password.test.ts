import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, createTestService, type TestService } from "../helpers/service";

/** `POST /auth/password`: a signed-in user changes their own password, proving the current one. */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc.close());

const login = (username: string, password: string) =>
  svc.request("/auth/login", { method: "POST", json: { username, password } });
const me = async (token: string) => (await svc.request("/auth/me", { token })).status;
const change = (token: string, json: unknown) => svc.request("/auth/password", { method: "POST", token, json });

/** A user of its own for each test, signed in twice (two browsers). */
async function newUser() {
  const username = `user-${randomUUID().slice(0, 8)}`;
  const password = "first-password";
  const admin = ((await (await login(ADMIN.username, ADMIN.password)).json()) as { token: string }).token;
  expect(
    (await svc.request("/dashboard/users", { method: "POST", token: admin, json: { username, password } })).status,
  ).toBe(201);
  const signIn = async () => ((await (await login(username, password)).json()) as { token: string }).token;
  return { username, password, here: await signIn(), elsewhere: await signIn(), admin };
}

describe("POST /auth/password", () => {
  it("changes the password: the new one signs in, the old one no longer does", async () => {
    const u = await newUser();
    const res = await change(u.here, { currentPassword: u.password, newPassword: "second-password" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { user: { username: string }; sessionsRevoked: number };
    expect(body.user.username).toBe(u.username);
    expect(body.sessionsRevoked).toBe(1);
    expect((await login(u.username, "second-password")).status).toBe(200);
    const old = await login(u.username, u.password);
    expect(old.status).toBe(401);
    expect(await old.json()).toEqual({ error: "Invalid username or password" });
  });

  it("keeps the session that changed it and signs out the user's others, not other users'", async () => {
    const u = await newUser();
    expect((await change(u.here, { currentPassword: u.password, newPassword: "second-password" })).status).toBe(200);
    expect(await me(u.here)).toBe(200);
    const other = await svc.request("/auth/me", { token: u.elsewhere });
    expect(other.status).toBe(401);
    expect(await other.json()).toEqual({ error: "Session has been revoked" });
    expect(await me(u.admin)).toBe(200);
  });

  it("refuses a wrong current password with 400 and changes nothing", async () => {
    const u = await newUser();
    const res = await change(u.here, { currentPassword: "not-my-password", newPassword: "second-password" });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "Current password is incorrect" });
    expect((await login(u.username, u.password)).status).toBe(200);
    expect((await login(u.username, "second-password")).status).toBe(401);
    expect(await me(u.elsewhere)).toBe(200);
  });

  it("applies the server's password rule (6-200 characters) to the new password, naming the field", async () => {
    const u = await newUser();
    for (const newPassword of ["short", "x".repeat(201)]) {
      const res = await change(u.here, { currentPassword: u.password, newPassword });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: string; issues: { path: string[] }[] };
      expect(body.error).toBe("Validation error");
      expect(body.issues.map((i) => i.path.join("."))).toEqual(["newPassword"]);
    }
    expect((await login(u.username, u.password)).status).toBe(200);
  });

  it("counts wrong current passwords with the name's sign-ins: after five even the right one waits, and signing in too", async () => {
    const u = await newUser();
    for (let i = 0; i < 5; i++) {
      expect((await change(u.here, { currentPassword: `wrong-${i}`, newPassword: "second-password" })).status).toBe(
        400,
      );
    }
    const refused = await change(u.here, { currentPassword: u.password, newPassword: "second-password" });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^[12]$/);
    expect(((await refused.json()) as { error: string }).error).toMatch(/^Too many wrong passwords for this username/);
    expect((await login(u.username, u.password)).status).toBe(429);
    // Once the wait is over the right password changes it, and the count is gone with the old password.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await change(u.here, { currentPassword: u.password, newPassword: "second-password" })).status).toBe(200);
    expect((await login(u.username, "second-password")).status).toBe(200);
  });

  it("needs a session", async () => {
    const res = await svc.request("/auth/password", {
      method: "POST",
      json: { currentPassword: ADMIN.password, newPassword: "second-password" },
    });
    expect(res.status).toBe(401);
    expect((await login(ADMIN.username, ADMIN.password)).status).toBe(200);
  });
});

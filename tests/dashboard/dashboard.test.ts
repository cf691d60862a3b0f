import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { login } from "../../lib/auth";
import { hashToken } from "../../lib/crypto";
import { apiKeys, jobs, messages, projects, threads, users } from "../../lib/db/schema";
import { DEFAULT_SETTINGS } from "../../lib/settings/settings";
import { deleteUser } from "../../lib/users";
import type { ApiSchema, ValidationError } from "../helpers/api-types";
import { ADMIN, adminSession, createTestService, newTenant, type TestService } from "../helpers/service";

// A manual clock so "newest first" orders are deterministic: tests advance it between creations.
// Every test makes its own session, projects, keys and users.
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService({ manualTime: true });
});
afterAll(() => svc.close());

type ValidationBody = ValidationError;
type ApiKeyRecord = ApiSchema<"ApiKey">;
type ProjectRecord = ApiSchema<"Project">;
type UserRecord = ApiSchema<"DashboardUser">;
type ThreadRecord = ApiSchema<"Thread">;
type Settings = typeof DEFAULT_SETTINGS;

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const uniqueName = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const tick = () => svc.clock!.advance(1000);

async function json<T>(res: Response, status: number): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

async function expectValidation(res: Response, path: (string | number)[]) {
  const body = await json<ValidationBody>(res, 400);
  expect(body.error).toBe("Validation error");
  expect(body.issues.length).toBeGreaterThan(0);
  for (const issue of body.issues) {
    expect(typeof issue.code).toBe("string");
    expect(typeof issue.message).toBe("string");
  }
  expect(body.issues.map((i) => i.path)).toContainEqual(path);
  return body;
}

async function expectError(res: Response, status: number, message: string) {
  expect(res.status).toBe(status);
  expect(await res.json()).toEqual({ error: message });
}

async function createProjectHttp(token: string, name = uniqueName("project")) {
  const res = await svc.request("/dashboard/projects", { method: "POST", token, json: { name } });
  return (await json<{ project: ProjectRecord }>(res, 201)).project;
}

async function createKeyHttp(token: string, projectId: string, name = "key") {
  const res = await svc.request("/dashboard/api-keys", { method: "POST", token, json: { name, projectId } });
  return json<{ key: string; apiKey: ApiKeyRecord }>(res, 201);
}

async function createThreadHttp(key: string, dataset = "d") {
  const res = await svc.request("/v1/threads", { method: "POST", token: key, json: { dataset } });
  return json<ThreadRecord>(res, 201);
}

async function createUserHttp(token: string, username = uniqueName("user"), password = "secret-password") {
  const res = await svc.request("/dashboard/users", { method: "POST", token, json: { username, password } });
  return { ...(await json<{ user: UserRecord }>(res, 201)).user, password };
}

// ---------------------------------------------------------------------------------------------

describe("API keys", () => {
  it("creates a key: 201 {key, apiKey} with a 67-character mk_ key shown once", async () => {
    const token = await adminSession(svc);
    const project = await createProjectHttp(token);
    const res = await svc.request("/dashboard/api-keys", {
      method: "POST",
      token,
      json: { name: "production", projectId: project.id },
    });
    const body = await json<{ key: string; apiKey: ApiKeyRecord }>(res, 201);
    expect(Object.keys(body).sort()).toEqual(["apiKey", "key"]);
    expect(body.key).toHaveLength(67);
    expect(body.key).toMatch(/^mk_[0-9a-f]{64}$/);
    expect(Object.keys(body.apiKey).sort()).toEqual(
      ["createdAt", "id", "keyPreview", "lastUsedAt", "name", "projectId", "revokedAt"].sort(),
    );
    expect(body.apiKey).toMatchObject({
      name: "production",
      projectId: project.id,
      lastUsedAt: null,
      revokedAt: null,
      createdAt: svc.clock!.now().toISOString(),
    });
    // The preview shows the prefix and the tail, never the whole key.
    expect(body.apiKey.keyPreview).not.toContain(body.key);
    expect(body.apiKey.keyPreview.startsWith("mk_")).toBe(true);
    expect(body.apiKey.keyPreview.endsWith(body.key.slice(-4))).toBe(true);
    expect(body.apiKey.keyPreview.length).toBeLessThan(20);
    // The key works on /v1 at once.
    expect((await svc.request("/v1/threads", { method: "POST", token: body.key, json: { dataset: "d" } })).status).toBe(
      201,
    );
  });

  it("stores only a hash of the key", async () => {
    const token = await adminSession(svc);
    const project = await createProjectHttp(token);
    const { key, apiKey } = await createKeyHttp(token, project.id);
    const [row] = await svc.deps.db.select().from(apiKeys).where(eq(apiKeys.id, apiKey.id));
    expect(row.keyHash).not.toBe(key);
    expect(row.keyHash).toBe(hashToken(key));
    // No column of the row holds the plaintext (or its random part).
    const raw = await svc.deps.db.execute(
      sql`SELECT row_to_json(k)::text AS j FROM api_keys k WHERE id = ${apiKey.id}`,
    );
    const rows = ((raw as { rows?: { j: string }[] }).rows ?? (raw as unknown as { j: string }[])) as { j: string }[];
    expect(rows).toHaveLength(1);
    expect(rows[0].j).not.toContain(key.slice(3));
    // Nor does any later listing.
    const list = await svc.request(`/dashboard/api-keys?projectId=${project.id}`, { token });
    expect(await list.text()).not.toContain(key.slice(3));
  });

  it("stamps lastUsedAt when the key is used on /v1", async () => {
    const token = await adminSession(svc);
    const project = await createProjectHttp(token);
    const { key, apiKey } = await createKeyHttp(token, project.id);
    svc.clock!.advance(5000);
    await createThreadHttp(key);
    const list = await json<{ apiKeys: ApiKeyRecord[] }>(
      await svc.request(`/dashboard/api-keys?projectId=${project.id}`, { token }),
      200,
    );
    const listed = list.apiKeys.find((k) => k.id === apiKey.id)!;
    expect(listed.lastUsedAt).toBe(svc.clock!.now().toISOString());
    expect(listed.lastUsedAt).not.toBe(apiKey.createdAt);
  });

  it("lists a project's keys as {apiKeys, total}, newest first, with limit and offset", async () => {
    const token = await adminSession(svc);
    const project = await createProjectHttp(token);
    const other = await createProjectHttp(token);
    await createKeyHttp(token, other.id, "elsewhere");
    const created: ApiKeyRecord[] = [];
    for (const name of ["k1", "k2", "k3"]) {
      tick();
      created.push((await createKeyHttp(token, project.id, name)).apiKey);
    }
    const all = await json<{ apiKeys: ApiKeyRecord[]; total: number }>(
      await svc.request(`/dashboard/api-keys?projectId=${project.id}`, { token }),
      200,
    );
    expect(Object.keys(all).sort()).toEqual(["apiKeys", "total"]);
    expect(all.total).toBe(3);
    expect(all.apiKeys).toEqual([...created].reverse());
    const page = await json<{ apiKeys: ApiKeyRecord[]; total: number }>(
      await svc.request(`/dashboard/api-keys?projectId=${project.id}&limit=2&offset=1`, { token }),
      200,
    );
    expect(page.total).toBe(3);
    expect(page.apiKeys.map((k) => k.name)).toEqual(["k2", "k1"]);
    // No plaintext key in a listing.
    expect(JSON.stringify(all)).not.toMatch(/mk_[0-9a-f]{64}/);
  });

  it("requires projectId to list keys", async () => {
    const token = await adminSession(svc);
    await expectValidation(await svc.request("/dashboard/api-keys", { token }), ["projectId"]);
    await expectValidation(await svc.request("/dashboard/api-keys?projectId=", { token }), ["projectId"]);
  });

  it("validates the create body and answers 404 for an unknown project", async () => {
    const token = await adminSession(svc);
    const project = await createProjectHttp(token);
    await expectValidation(
      await svc.request("/dashboard/api-keys", { method: "POST", token, json: { projectId: project.id } }),
      ["name"],
    );
    await expectValidation(
      await svc.request("/dashboard/api-keys", { method: "POST", token, json: { name: "", projectId: project.id } }),
      ["name"],
    );
    await expectValidation(await svc.request("/dashboard/api-keys", { method: "POST", token, json: { name: "x" } }), [
      "projectId",
    ]);
    await expectError(
      await svc.request("/dashboard/api-keys", { method: "POST", token, json: { name: "x", projectId: "prj_nope" } }),
      404,
      "Project not found",
    );
    const [{ n }] = await svc.deps.db
      .select({ n: sql<number>`count(*)::int` })
      .from(apiKeys)
      .where(eq(apiKeys.projectId, project.id));
    expect(n).toBe(0);
  });

  it("revokes a key: immediate, permanent, the row is kept with revokedAt", async () => {
    const token = await adminSession(svc);
    const project = await createProjectHttp(token);
    const { key, apiKey } = await createKeyHttp(token, project.id);
    const { key: sibling } = await createKeyHttp(token, project.id, "sibling");
    await createThreadHttp(key);
    tick();
    const revokedAt = svc.clock!.now().toISOString();
    const res = await svc.request(`/dashboard/api-keys/${apiKey.id}`, { method: "DELETE", token });
    const body = await json<{ apiKey: ApiKeyRecord }>(res, 200);
    expect(body.apiKey).toMatchObject({ id: apiKey.id, revokedAt });
    expect((await svc.request("/v1/threads", { method: "POST", token: key, json: { dataset: "d" } })).status).toBe(401);
    // Revoking again keeps the first revocation time.
    tick();
    const again = await json<{ apiKey: ApiKeyRecord }>(
      await svc.request(`/dashboard/api-keys/${apiKey.id}`, { method: "DELETE", token }),
      200,
    );
    expect(again.apiKey.revokedAt).toBe(revokedAt);
    const list = await json<{ apiKeys: ApiKeyRecord[]; total: number }>(
      await svc.request(`/dashboard/api-keys?projectId=${project.id}`, { token }),
      200,
    );
    expect(list.total).toBe(2);
    expect(list.apiKeys.find((k) => k.id === apiKey.id)?.revokedAt).toBe(revokedAt);
    // The project's other key is unaffected.
    await createThreadHttp(sibling);
  });

  it("answers 404 when revoking an unknown key", async () => {
    const token = await adminSession(svc);
    await expectError(
      await svc.request("/dashboard/api-keys/key_nope", { method: "DELETE", token }),
      404,
      "API key not found",
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("projects", () => {
  it("creates a project: 201 {project: {id, name, createdAt}}", async () => {
    const token = await adminSession(svc);
    const name = uniqueName("Acme");
    const res = await svc.request("/dashboard/projects", { method: "POST", token, json: { name } });
    const { project } = await json<{ project: ProjectRecord }>(res, 201);
    expect(Object.keys(project).sort()).toEqual(["createdAt", "id", "name"]);
    expect(project.name).toBe(name);
    expect(project.createdAt).toMatch(ISO);
    const [row] = await svc.deps.db.select().from(projects).where(eq(projects.id, project.id));
    expect(row.name).toBe(name);
  });

  it("accepts names of 1 and 100 characters and rejects 0, 101 and blank", async () => {
    const token = await adminSession(svc);
    for (const name of ["a", "n".repeat(100)]) {
      const res = await svc.request("/dashboard/projects", { method: "POST", token, json: { name } });
      expect((await json<{ project: ProjectRecord }>(res, 201)).project.name).toBe(name);
    }
    const before = await svc.deps.db.select({ n: sql<number>`count(*)::int` }).from(projects);
    for (const json of [{ name: "" }, { name: "n".repeat(101) }, { name: "   " }, {}, { name: 5 }]) {
      await expectValidation(await svc.request("/dashboard/projects", { method: "POST", token, json }), ["name"]);
    }
    const after = await svc.deps.db.select({ n: sql<number>`count(*)::int` }).from(projects);
    expect(after[0].n).toBe(before[0].n);
  });

  it("answers 409 Project name already taken for a name another project has, trimmed and in any case", async () => {
    const token = await adminSession(svc);
    const post = (name: string) => svc.request("/dashboard/projects", { method: "POST", token, json: { name } });
    const count = async () => (await svc.deps.db.select({ n: sql<number>`count(*)::int` }).from(projects))[0].n;
    const name = uniqueName("Taken Name");
    const first = await createProjectHttp(token, name);
    const before = await count();
    for (const again of [name, name.toLowerCase(), `  ${name.toUpperCase()}  `]) {
      await expectError(await post(again), 409, "Project name already taken");
    }
    // Nothing was written, and the first keeps its name.
    expect(await count()).toBe(before);
    const [row] = await svc.deps.db.select().from(projects).where(eq(projects.id, first.id));
    expect(row.name).toBe(name);
    // Another name is fine; the name is free again once its project is deleted.
    expect((await post(`${name} 2`)).status).toBe(201);
    expect((await svc.request(`/dashboard/projects/${first.id}`, { method: "DELETE", token })).status).toBe(204);
    expect((await json<{ project: ProjectRecord }>(await post(name.toLowerCase()), 201)).project.name).toBe(
      name.toLowerCase(),
    );
  });

  it("lets one of several creates of the same name at once through, and refuses the others", async () => {
    const token = await adminSession(svc);
    const name = uniqueName("Raced");
    const answers = await Promise.all(
      [name, name, name.toUpperCase(), name, ` ${name}`].map((n) =>
        svc.request("/dashboard/projects", { method: "POST", token, json: { name: n } }),
      ),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409]);
    const [{ n }] = await svc.deps.db
      .select({ n: sql<number>`count(*)::int` })
      .from(projects)
      .where(sql`lower(${projects.name}) = lower(${name})`);
    expect(n).toBe(1);
  });

  it("lists projects as {projects, total}, newest first, with limit and offset", async () => {
    const token = await adminSession(svc);
    const created: ProjectRecord[] = [];
    for (let i = 0; i < 3; i++) {
      tick();
      created.push(await createProjectHttp(token));
    }
    const [{ n }] = await svc.deps.db.select({ n: sql<number>`count(*)::int` }).from(projects);
    const first = await json<{ projects: ProjectRecord[]; total: number }>(
      await svc.request("/dashboard/projects?limit=2", { token }),
      200,
    );
    expect(Object.keys(first).sort()).toEqual(["projects", "total"]);
    expect(first.total).toBe(n);
    expect(first.projects).toEqual([created[2], created[1]]);
    const second = await json<{ projects: ProjectRecord[]; total: number }>(
      await svc.request("/dashboard/projects?limit=2&offset=2", { token }),
      200,
    );
    expect(second.projects[0]).toEqual(created[0]);
    const beyond = await json<{ projects: ProjectRecord[]; total: number }>(
      await svc.request(`/dashboard/projects?offset=${n}`, { token }),
      200,
    );
    expect(beyond).toEqual({ projects: [], total: n });
  });

  it("rejects out-of-range paging with 400, never clamping", async () => {
    const token = await adminSession(svc);
    for (const [query, field] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=abc", "limit"],
      ["offset=-1", "offset"],
      ["limit=1.5", "limit"],
    ] as const) {
      await expectValidation(await svc.request(`/dashboard/projects?${query}`, { token }), [field]);
    }
    expect((await svc.request("/dashboard/projects?limit=100&offset=0", { token })).status).toBe(200);
  });

  it("deletes a project with everything in it, and nothing else", async () => {
    const token = await adminSession(svc);
    const doomed = await createProjectHttp(token);
    const kept = await createProjectHttp(token);
    const { key, apiKey } = await createKeyHttp(token, doomed.id);
    const { key: keptKey } = await createKeyHttp(token, kept.id);
    const thread = await createThreadHttp(key);
    const keptThread = await createThreadHttp(keptKey);
    for (const k of [key, keptKey]) {
      const threadId = k === key ? thread.threadId : keptThread.threadId;
      const res = await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
        method: "POST",
        token: k,
        json: { role: "user", content: "hello" },
      });
      expect(res.status).toBe(201);
    }
    await svc.request(`/dashboard/projects/${doomed.id}/settings`, {
      method: "PATCH",
      token,
      json: { episodic: { maxRetries: 5 } },
    });

    const res = await svc.request(`/dashboard/projects/${doomed.id}`, { method: "DELETE", token });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");

    // Its key is gone with it: unknown, not revoked.
    await expectError(
      await svc.request("/v1/threads", { method: "POST", token: key, json: { dataset: "d" } }),
      401,
      "Invalid API key",
    );
    const count = async (table: typeof apiKeys | typeof threads | typeof messages | typeof jobs, projectId: string) => {
      const [{ n }] = await svc.deps.db
        .select({ n: sql<number>`count(*)::int` })
        .from(table)
        .where(eq(table.projectId, projectId));
      return n;
    };
    expect(await svc.deps.db.select().from(apiKeys).where(eq(apiKeys.id, apiKey.id))).toEqual([]);
    expect(await count(threads, doomed.id)).toBe(0);
    expect(await count(messages, doomed.id)).toBe(0);
    expect(await count(jobs, doomed.id)).toBe(0);
    expect(await svc.deps.db.select().from(messages).where(eq(messages.threadId, thread.threadId))).toEqual([]);
    await expectError(
      await svc.request(`/dashboard/projects/${doomed.id}/settings`, { token }),
      404,
      "Project not found",
    );
    await expectError(
      await svc.request(`/dashboard/browse/threads?projectId=${doomed.id}`, { token }),
      404,
      "Project not found",
    );

    // The other project is untouched.
    expect(await count(threads, kept.id)).toBe(1);
    expect(await count(messages, kept.id)).toBe(1);
    expect((await svc.request(`/v1/threads/${keptThread.threadId}`, { token: keptKey })).status).toBe(200);

    // Deleting again: 404.
    await expectError(
      await svc.request(`/dashboard/projects/${doomed.id}`, { method: "DELETE", token }),
      404,
      "Project not found",
    );
  });

  it("answers 404 Project not found for an unknown project", async () => {
    const token = await adminSession(svc);
    await expectError(
      await svc.request("/dashboard/projects/prj_nope", { method: "DELETE", token }),
      404,
      "Project not found",
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("users", () => {
  it("creates a user: 201 {user}, no password in the answer, stored as a scrypt hash", async () => {
    const token = await adminSession(svc);
    const username = uniqueName("alice");
    const res = await svc.request("/dashboard/users", {
      method: "POST",
      token,
      json: { username, password: "correct horse" },
    });
    const text = await res.text();
    expect(res.status).toBe(201);
    expect(text).not.toContain("correct horse");
    const { user } = JSON.parse(text) as { user: UserRecord };
    expect(Object.keys(user).sort()).toEqual(["createdAt", "id", "updatedAt", "username"]);
    expect(user.username).toBe(username);
    expect(user.createdAt).toMatch(ISO);
    expect(user.updatedAt).toMatch(ISO);
    const [row] = await svc.deps.db.select().from(users).where(eq(users.id, user.id));
    expect(row.passwordHash).toMatch(/^scrypt\$/);
    expect(row.passwordHash).not.toContain("correct horse");
    expect((await login(svc.deps, username, "correct horse")).user.id).toBe(user.id);
  });

  it("answers 409 Username already taken for a duplicate", async () => {
    const token = await adminSession(svc);
    const user = await createUserHttp(token);
    await expectError(
      await svc.request("/dashboard/users", {
        method: "POST",
        token,
        json: { username: user.username, password: "another-one" },
      }),
      409,
      "Username already taken",
    );
    await expectError(
      await svc.request("/dashboard/users", {
        method: "POST",
        token,
        json: { username: ADMIN.username, password: "xxxxxx" },
      }),
      409,
      "Username already taken",
    );
    // The original password still works (nothing was overwritten).
    expect((await login(svc.deps, user.username, user.password)).user.id).toBe(user.id);
  });

  it("validates username 1-100 and password 6-200 characters", async () => {
    const token = await adminSession(svc);
    const post = (username: string, password: string) =>
      svc.request("/dashboard/users", { method: "POST", token, json: { username, password } });
    await expectValidation(await post("", "secret"), ["username"]);
    await expectValidation(await post(`${uniqueName("u")}${"x".repeat(101)}`.slice(0, 101), "secret"), ["username"]);
    await expectValidation(await post(uniqueName("u"), "12345"), ["password"]);
    await expectValidation(await post(uniqueName("u"), "p".repeat(201)), ["password"]);
    // A lone surrogate would be hashed as U+FFFD, so any other lone one would sign in too.
    await expectValidation(await post(uniqueName("u"), `pass${String.fromCharCode(0xd800)}word`), ["password"]);
    // The boundaries themselves are accepted.
    const longName = `${uniqueName("u")}${"x".repeat(100)}`.slice(0, 100);
    expect((await post(longName, "123456")).status).toBe(201);
    expect((await post(uniqueName("u"), "p".repeat(200))).status).toBe(201);
    expect((await post("u", "123456")).status).toBe(201);
  });

  it("lists users as {users, total} with limit and offset, without password hashes", async () => {
    const token = await adminSession(svc);
    const a = await createUserHttp(token);
    const [{ n }] = await svc.deps.db.select({ n: sql<number>`count(*)::int` }).from(users);
    const all = await json<{ users: UserRecord[]; total: number }>(
      await svc.request("/dashboard/users?limit=100", { token }),
      200,
    );
    expect(Object.keys(all).sort()).toEqual(["total", "users"]);
    expect(all.total).toBe(n);
    expect(all.users).toHaveLength(Math.min(n, 100));
    expect(all.users).toContainEqual({
      id: a.id,
      username: a.username,
      createdAt: a.createdAt,
      updatedAt: a.updatedAt,
    });
    expect(JSON.stringify(all)).not.toMatch(/scrypt|password/i);
    const page = await json<{ users: UserRecord[]; total: number }>(
      await svc.request("/dashboard/users?limit=1&offset=1", { token }),
      200,
    );
    expect(page.total).toBe(n);
    expect(page.users).toEqual([all.users[1]]);
  });

  it("lists users newest first, so a new user is on the first page", async () => {
    const token = await adminSession(svc);
    const created: UserRecord[] = [];
    for (let i = 0; i < 3; i++) {
      tick();
      const { password: _password, ...user } = await createUserHttp(token);
      created.push(user);
    }
    const first = await json<{ users: UserRecord[]; total: number }>(
      await svc.request("/dashboard/users?limit=3", { token }),
      200,
    );
    expect(first.users).toEqual([created[2], created[1], created[0]]);
    const next = await json<{ users: UserRecord[]; total: number }>(
      await svc.request("/dashboard/users?limit=1&offset=1", { token }),
      200,
    );
    expect(next.users).toEqual([created[1]]);
  });

  it("deletes another user: 204, they can no longer sign in and leave the list", async () => {
    const token = await adminSession(svc);
    const user = await createUserHttp(token);
    const res = await svc.request(`/dashboard/users/${user.id}`, { method: "DELETE", token });
    expect(res.status).toBe(204);
    expect(await svc.deps.db.select().from(users).where(eq(users.id, user.id))).toEqual([]);
    await expect(login(svc.deps, user.username, user.password)).rejects.toThrow("Invalid username or password");
    const list = await json<{ users: UserRecord[] }>(await svc.request("/dashboard/users?limit=100", { token }), 200);
    expect(list.users.map((u) => u.id)).not.toContain(user.id);
    // Deleting again: 404.
    await expectError(
      await svc.request(`/dashboard/users/${user.id}`, { method: "DELETE", token }),
      404,
      "User not found",
    );
  });

  it("refuses to delete your own account", async () => {
    const admin = await adminSession(svc);
    const user = await createUserHttp(admin);
    const token = (await login(svc.deps, user.username, user.password)).token;
    await expectError(
      await svc.request(`/dashboard/users/${user.id}`, { method: "DELETE", token }),
      400,
      "You cannot delete your own account",
    );
    expect(await svc.deps.db.select().from(users).where(eq(users.id, user.id))).toHaveLength(1);
    expect((await svc.request("/auth/me", { token })).status).toBe(200);
  });

  it("answers 404 User not found for an unknown user", async () => {
    const token = await adminSession(svc);
    await expectError(
      await svc.request("/dashboard/users/usr_nope", { method: "DELETE", token }),
      404,
      "User not found",
    );
  });
});

describe("the last user", () => {
  // Over HTTP the acting user always exists, so "last user" is only reachable when two users
  // delete each other at once. These tests need a database holding exactly one or two users,
  // hence their own service.
  let lone: TestService;
  beforeAll(async () => {
    lone = await createTestService();
  });
  afterAll(() => lone.close());

  it("is never deleted (service layer: the only user, deleted by someone else)", async () => {
    const [admin] = await lone.deps.db.select().from(users).where(eq(users.username, ADMIN.username));
    const all = await lone.deps.db.select().from(users);
    expect(all).toHaveLength(1);
    await expect(deleteUser(lone.deps, { actingUserId: "usr_someone_else", userId: admin.id })).rejects.toMatchObject({
      status: 400,
      message: "Cannot delete the last user",
    });
    expect(await lone.deps.db.select().from(users)).toHaveLength(1);
  });

  it("survives two users deleting each other at the same time (HTTP)", async () => {
    const adminToken = (await login(lone.deps, ADMIN.username, ADMIN.password)).token;
    const [admin] = await lone.deps.db.select().from(users).where(eq(users.username, ADMIN.username));
    const bRes = await lone.request("/dashboard/users", {
      method: "POST",
      token: adminToken,
      json: { username: "bob", password: "bob-password" },
    });
    const { user: bob } = (await bRes.json()) as { user: UserRecord };
    const bobToken = (await login(lone.deps, "bob", "bob-password")).token;
    const [a, b] = await Promise.all([
      lone.request(`/dashboard/users/${bob.id}`, { method: "DELETE", token: adminToken }),
      lone.request(`/dashboard/users/${admin.id}`, { method: "DELETE", token: bobToken }),
    ]);
    const outcomes = await Promise.all(
      [a, b].map(async (r) => ({ status: r.status, body: r.status === 204 ? null : await r.json() })),
    );
    expect(outcomes.filter((o) => o.status === 204)).toHaveLength(1);
    const loser = outcomes.find((o) => o.status !== 204)!;
    // Either the guard fired, or the loser's session was already detached from its deleted user.
    expect([
      JSON.stringify({ status: 400, body: { error: "Cannot delete the last user" } }),
      JSON.stringify({ status: 401, body: { error: "Session user no longer exists" } }),
    ]).toContain(JSON.stringify(loser));
    expect(await lone.deps.db.select().from(users)).toHaveLength(1);
  });
});

describe("text the database cannot store", () => {
  it("rejects a NUL character in any dashboard body field with 400 naming the field", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const cases: [string, unknown, string[]][] = [
      ["/dashboard/projects", { name: "a\u0000b" }, ["name"]],
      ["/dashboard/api-keys", { name: "a\u0000b", projectId: t.projectId }, ["name"]],
      ["/dashboard/api-keys", { name: "ab", projectId: `${t.projectId}\u0000` }, ["projectId"]],
      ["/dashboard/users", { username: "a\u0000b", password: "secret-password" }, ["username"]],
    ];
    for (const [path, body, field] of cases) {
      await expectValidation(await svc.request(path, { method: "POST", token, json: body }), field);
    }
    const keys = await json<{ total: number }>(
      await svc.request(`/dashboard/api-keys?projectId=${t.projectId}`, { token }),
      200,
    );
    expect(keys.total).toBe(1);
    await expectValidation(await svc.request("/dashboard/browse/threads?projectId=a%00b", { token }), ["projectId"]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("project settings", () => {
  const settingsOf = async (token: string, projectId: string) =>
    (await json<{ settings: Settings }>(await svc.request(`/dashboard/projects/${projectId}/settings`, { token }), 200))
      .settings;
  const patch = (token: string, projectId: string, body: unknown) =>
    svc.request(`/dashboard/projects/${projectId}/settings`, { method: "PATCH", token, json: body });

  it("returns the spec's 15 values, autoCompactThreshold and the ranking settings with the built-in defaults for a new project", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const res = await svc.request(`/dashboard/projects/${t.projectId}/settings`, { token });
    expect(await json(res, 200)).toEqual({
      settings: {
        working: { autoCompactThreshold: 20 },
        episodic: {
          enabled: true,
          autoEpisodeIntervalMs: 1800000,
          maxMessages: 100,
          maxRetries: 3,
          contextEpisodes: 3,
          similarityWeight: 0.7,
          recencyWeight: 0.3,
        },
        semantic: {
          enabled: true,
          retrievalMinConfidence: 0.5,
          factsInContext: 8,
          entityResolutionThreshold: 0.88,
          factDedupThreshold: 0.95,
          contradictionBandMin: 0.8,
          anchorVectorMin: 0.75,
          anchorVectorTopK: 3,
          vectorWeight: 1,
          keywordWeight: 0.5,
          entityWeight: 0.1,
          timeWeight: 0.3,
          rerank: false,
          rerankCandidates: 20,
          rerankTimeoutMs: 2000,
          vectorSecondSearch: true,
          messagesInContext: 6,
          indexAssistantMessages: false,
        },
        usage: { monthlyTokenBudget: null },
      },
    });
  });

  it("deep-merges partial patches and stores only what was set", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const first = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { episodic: { maxRetries: 7 } }),
      200,
    );
    const expected1 = structuredClone(DEFAULT_SETTINGS);
    expected1.episodic.maxRetries = 7;
    expect(first.settings).toEqual(expected1);
    expect(await settingsOf(token, t.projectId)).toEqual(expected1);

    const second = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { semantic: { factsInContext: 20, anchorVectorTopK: 5 } }),
      200,
    );
    const expected2 = structuredClone(expected1);
    expected2.semantic.factsInContext = 20;
    expected2.semantic.anchorVectorTopK = 5;
    expect(second.settings).toEqual(expected2);

    const third = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { episodic: { enabled: false, similarityWeight: 0, recencyWeight: 1 } }),
      200,
    );
    const expected3 = structuredClone(expected2);
    Object.assign(expected3.episodic, { enabled: false, similarityWeight: 0, recencyWeight: 1 });
    expect(third.settings).toEqual(expected3);
    expect(await settingsOf(token, t.projectId)).toEqual(expected3);

    // Stored as a partial object: defaults are not copied into the row.
    const [row] = await svc.deps.db.select().from(projects).where(eq(projects.id, t.projectId));
    const stored = row.settings as { episodic?: Record<string, unknown>; semantic?: Record<string, unknown> };
    expect(stored.episodic).toEqual({ maxRetries: 7, enabled: false, similarityWeight: 0, recencyWeight: 1 });
    expect(stored.semantic).toEqual({ factsInContext: 20, anchorVectorTopK: 5 });
  });

  it("lands every one of many changes made at once (each re-applied until it lands), none lost", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    // 12 changes at once, each of its own value: every round lands one of them, the others retry.
    const values = Array.from({ length: 12 }, (_, i) => 10 + i);
    const answers = await Promise.all(
      values.map((n, i) =>
        patch(token, t.projectId, i % 2 ? { episodic: { maxMessages: n } } : { semantic: { factsInContext: n } }),
      ),
    );
    expect(answers.map((r) => r.status)).toEqual(values.map(() => 200));
    const settings = await settingsOf(token, t.projectId);
    // The last change to land wins its field; each field holds one of the values sent to it.
    expect(values.filter((_, i) => i % 2)).toContain(settings.episodic.maxMessages);
    expect(values.filter((_, i) => i % 2 === 0)).toContain(settings.semantic.factsInContext);
  });

  it("keeps projects' settings apart", async () => {
    const token = await adminSession(svc);
    const a = await newTenant(svc);
    const b = await newTenant(svc);
    expect((await patch(token, a.projectId, { semantic: { factsInContext: 42 } })).status).toBe(200);
    expect((await settingsOf(token, b.projectId)).semantic.factsInContext).toBe(8);
  });

  it("accepts autoEpisodeIntervalMs null (timer off) and a number again later", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const off = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { episodic: { autoEpisodeIntervalMs: null } }),
      200,
    );
    expect(off.settings.episodic.autoEpisodeIntervalMs).toBeNull();
    expect((await settingsOf(token, t.projectId)).episodic.autoEpisodeIntervalMs).toBeNull();
    // Patching something else keeps the null.
    await patch(token, t.projectId, { episodic: { maxRetries: 1 } });
    expect((await settingsOf(token, t.projectId)).episodic.autoEpisodeIntervalMs).toBeNull();
    const on = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { episodic: { autoEpisodeIntervalMs: 1000 } }),
      200,
    );
    expect(on.settings.episodic.autoEpisodeIntervalMs).toBe(1000);
  });

  it("accepts every bound exactly", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const lows = {
      episodic: { maxMessages: 10, maxRetries: 0, contextEpisodes: 1, similarityWeight: 0, recencyWeight: 0 },
      semantic: {
        retrievalMinConfidence: 0,
        factsInContext: 1,
        entityResolutionThreshold: 0,
        factDedupThreshold: 0,
        contradictionBandMin: 0,
        anchorVectorMin: 0,
        anchorVectorTopK: 1,
      },
    };
    const highs = {
      episodic: { maxMessages: 1000, maxRetries: 10, contextEpisodes: 20, similarityWeight: 1, recencyWeight: 1 },
      semantic: {
        retrievalMinConfidence: 1,
        factsInContext: 100,
        entityResolutionThreshold: 1,
        factDedupThreshold: 1,
        contradictionBandMin: 1,
        anchorVectorMin: 1,
        anchorVectorTopK: 10,
      },
    };
    for (const body of [lows, highs]) {
      const res = await json<{ settings: Settings }>(await patch(token, t.projectId, body), 200);
      expect(res.settings.episodic).toMatchObject(body.episodic);
      expect(res.settings.semantic).toMatchObject(body.semantic);
    }
  });

  it("rejects out-of-range values with 400 naming the field, writes nothing and never clamps", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    await patch(token, t.projectId, { episodic: { maxRetries: 4 } });
    const before = await settingsOf(token, t.projectId);
    const cases: [unknown, (string | number)[]][] = [
      [{ episodic: { maxMessages: 9 } }, ["episodic", "maxMessages"]],
      [{ episodic: { maxMessages: 1001 } }, ["episodic", "maxMessages"]],
      [{ episodic: { maxMessages: 50.5 } }, ["episodic", "maxMessages"]],
      [{ episodic: { maxRetries: 11 } }, ["episodic", "maxRetries"]],
      [{ episodic: { maxRetries: -1 } }, ["episodic", "maxRetries"]],
      [{ episodic: { contextEpisodes: 0 } }, ["episodic", "contextEpisodes"]],
      [{ episodic: { contextEpisodes: 21 } }, ["episodic", "contextEpisodes"]],
      [{ episodic: { similarityWeight: 1.5 } }, ["episodic", "similarityWeight"]],
      [{ episodic: { recencyWeight: -0.1 } }, ["episodic", "recencyWeight"]],
      [{ episodic: { autoEpisodeIntervalMs: 999 } }, ["episodic", "autoEpisodeIntervalMs"]],
      [{ episodic: { enabled: "yes" } }, ["episodic", "enabled"]],
      [{ semantic: { anchorVectorTopK: 0 } }, ["semantic", "anchorVectorTopK"]],
      [{ semantic: { anchorVectorTopK: 11 } }, ["semantic", "anchorVectorTopK"]],
      [{ semantic: { factsInContext: 0 } }, ["semantic", "factsInContext"]],
      [{ semantic: { factsInContext: 101 } }, ["semantic", "factsInContext"]],
      [{ semantic: { retrievalMinConfidence: 1.01 } }, ["semantic", "retrievalMinConfidence"]],
      [{ semantic: { entityResolutionThreshold: -1 } }, ["semantic", "entityResolutionThreshold"]],
      [{ semantic: { anchorVectorMin: 2 } }, ["semantic", "anchorVectorMin"]],
      [{ semantic: { enabled: null } }, ["semantic", "enabled"]],
      [{ episodic: "fast" }, ["episodic"]],
      // One bad value spoils the whole patch: the valid part is not written either.
      [{ episodic: { maxRetries: 9, maxMessages: 5000 } }, ["episodic", "maxMessages"]],
      [{ episodic: { contextEpisodes: 5 }, semantic: { factsInContext: 1000 } }, ["semantic", "factsInContext"]],
    ];
    for (const [body, path] of cases) {
      await expectValidation(await patch(token, t.projectId, body), path);
    }
    expect(await settingsOf(token, t.projectId)).toEqual(before);
    expect(before.episodic.maxRetries).toBe(4);
  });

  it("rejects contradictionBandMin above factDedupThreshold, from either side", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const before = await settingsOf(token, t.projectId);
    // In one patch: both fields named.
    const both = await expectValidation(
      await patch(token, t.projectId, { semantic: { contradictionBandMin: 0.9, factDedupThreshold: 0.85 } }),
      ["semantic", "contradictionBandMin"],
    );
    expect(both.issues.map((i) => i.path)).toContainEqual(["semantic", "factDedupThreshold"]);
    // Against the stored (default) dedup threshold 0.95.
    await expectValidation(await patch(token, t.projectId, { semantic: { contradictionBandMin: 0.96 } }), [
      "semantic",
      "contradictionBandMin",
    ]);
    // Lowering the dedup threshold below the stored band floor 0.80: the refusal names the field
    // sent, with the value sent.
    const lowered = await expectValidation(await patch(token, t.projectId, { semantic: { factDedupThreshold: 0.7 } }), [
      "semantic",
      "factDedupThreshold",
    ]);
    expect(lowered.issues).toEqual([expect.objectContaining({ path: ["semantic", "factDedupThreshold"], input: 0.7 })]);
    expect(await settingsOf(token, t.projectId)).toEqual(before);
    // Equal is allowed: the band may be empty.
    const equal = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { semantic: { contradictionBandMin: 0.9, factDedupThreshold: 0.9 } }),
      200,
    );
    expect(equal.settings.semantic).toMatchObject({ contradictionBandMin: 0.9, factDedupThreshold: 0.9 });
  });

  it("ignores a stored pair that breaks the band rule, and still takes changes to other settings", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    // Written before the rule existed, or straight into the table.
    await svc.deps.db
      .update(projects)
      .set({ settings: { semantic: { contradictionBandMin: 0.99, factDedupThreshold: 0.5, anchorVectorTopK: 3 } } })
      .where(eq(projects.id, t.projectId));
    const { contradictionBandMin, factDedupThreshold } = DEFAULT_SETTINGS.semantic;
    expect((await settingsOf(token, t.projectId)).semantic).toMatchObject({
      contradictionBandMin,
      factDedupThreshold,
      anchorVectorTopK: 3,
    });
    // Another setting, an empty patch and a reset of another key all land (each was a 400).
    const other = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { semantic: { anchorVectorTopK: 4 } }),
      200,
    );
    expect(other.settings.semantic).toMatchObject({ contradictionBandMin, factDedupThreshold, anchorVectorTopK: 4 });
    await json(await patch(token, t.projectId, {}), 200);
    const reset = await svc.request(`/dashboard/projects/${t.projectId}/settings/semantic/anchorVectorTopK`, {
      method: "DELETE",
      token,
    });
    expect(reset.status).toBe(200);
    // A change to the pair is checked: another breaking value is refused, a valid pair lands.
    await expectValidation(await patch(token, t.projectId, { semantic: { contradictionBandMin: 0.98 } }), [
      "semantic",
      "contradictionBandMin",
    ]);
    const fixed = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { semantic: { contradictionBandMin: 0.5 } }),
      200,
    );
    expect(fixed.settings.semantic).toMatchObject({ contradictionBandMin: 0.5, factDedupThreshold: 0.5 });
  });

  it("keeps the band rule under concurrent patches that are each valid alone", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    // Alone, each is fine (0.80 <= 0.85 and 0.90 <= 0.95); together they would break the rule.
    const [a, b] = await Promise.all([
      patch(token, t.projectId, { semantic: { factDedupThreshold: 0.85 } }),
      patch(token, t.projectId, { semantic: { contradictionBandMin: 0.9 } }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 400]);
    const after = await settingsOf(token, t.projectId);
    expect(after.semantic.contradictionBandMin).toBeLessThanOrEqual(after.semantic.factDedupThreshold);
  });

  it("strips unknown fields and accepts an empty patch", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const res = await json<{ settings: Settings }>(
      await patch(token, t.projectId, { episodic: { maxRetries: 2, bogus: 1 }, other: { x: 1 } }),
      200,
    );
    expect(res.settings).toEqual({ ...DEFAULT_SETTINGS, episodic: { ...DEFAULT_SETTINGS.episodic, maxRetries: 2 } });
    const [row] = await svc.deps.db.select().from(projects).where(eq(projects.id, t.projectId));
    expect(JSON.stringify(row.settings)).not.toMatch(/bogus|other/);
    expect(await json(await patch(token, t.projectId, {}), 200)).toEqual({ settings: res.settings });
  });

  it("answers 404 Project not found for an unknown project", async () => {
    const token = await adminSession(svc);
    await expectError(await svc.request("/dashboard/projects/prj_nope/settings", { token }), 404, "Project not found");
    await expectError(await patch(token, "prj_nope", { episodic: { maxRetries: 1 } }), 404, "Project not found");
  });
});

// ---------------------------------------------------------------------------------------------

describe("GET /dashboard/browse/threads", () => {
  it("pages a project's threads newest first with {threads, total}", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const other = await newTenant(svc);
    await createThreadHttp(other.key, "a");
    const created: ThreadRecord[] = [];
    for (const dataset of ["a", "b", "a", "b", "b"]) {
      tick();
      created.push(await createThreadHttp(t.key, dataset));
    }
    const newestFirst = [...created].reverse().map((th) => th.threadId);
    const seen: string[] = [];
    for (const offset of [0, 2, 4]) {
      const page = await json<{ threads: ThreadRecord[]; total: number }>(
        await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&limit=2&offset=${offset}`, { token }),
        200,
      );
      expect(Object.keys(page).sort()).toEqual(["threads", "total"]);
      expect(page.total).toBe(5);
      seen.push(...page.threads.map((th) => th.threadId));
    }
    expect(seen).toEqual(newestFirst);
    const empty = await json<{ threads: ThreadRecord[]; total: number }>(
      await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&offset=5`, { token }),
      200,
    );
    expect(empty).toEqual({ threads: [], total: 5 });
    // The records are the same thread records /v1 returns.
    const one = await json<{ threads: ThreadRecord[] }>(
      await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&limit=1`, { token }),
      200,
    );
    const direct = await json<ThreadRecord>(
      await svc.request(`/v1/threads/${one.threads[0].threadId}`, { token: t.key }),
      200,
    );
    expect(one.threads[0]).toEqual(direct);
  });

  it("filters by dataset", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    const other = await newTenant(svc);
    await createThreadHttp(other.key, "alpha");
    const alpha: string[] = [];
    for (const dataset of ["alpha", "beta", "alpha"]) {
      tick();
      const th = await createThreadHttp(t.key, dataset);
      if (dataset === "alpha") alpha.push(th.threadId);
    }
    const res = await json<{ threads: ThreadRecord[]; total: number }>(
      await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&dataset=alpha`, { token }),
      200,
    );
    expect(res.total).toBe(2);
    expect(res.threads.map((th) => th.threadId)).toEqual([...alpha].reverse());
    expect(res.threads.every((th) => th.dataset === "alpha")).toBe(true);
    const none = await json<{ threads: ThreadRecord[]; total: number }>(
      await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&dataset=gamma`, { token }),
      200,
    );
    expect(none).toEqual({ threads: [], total: 0 });
  });

  it("requires projectId and validates paging", async () => {
    const token = await adminSession(svc);
    const t = await newTenant(svc);
    await expectValidation(await svc.request("/dashboard/browse/threads", { token }), ["projectId"]);
    await expectValidation(
      await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&limit=101`, { token }),
      ["limit"],
    );
    await expectValidation(
      await svc.request(`/dashboard/browse/threads?projectId=${t.projectId}&offset=-5`, { token }),
      ["offset"],
    );
  });
});

import { randomBytes, randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { revokeApiKey } from "../../lib/api-keys";
import { login } from "../../lib/auth";
import { hashPassword, hashToken } from "../../lib/crypto";
import { apiKeys, sessions, users } from "../../lib/db/schema";
import { newId } from "../../lib/ids";
import { deleteUser } from "../../lib/users";
import {
  type DocumentedRoute,
  documentedRoutes,
  type OpenApiDoc,
  type Parameter,
  type Schema,
} from "../helpers/openapi";
import { ADMIN, createTestService, newTenant } from "../helpers/service";

/**
 * One security suite over every route the app documents: the routes are read from
 * GET /openapi.json, so a new route is covered as soon as it exists. Path parameters are filled
 * with the ids of another tenant's real resources, bodies and required query parameters with
 * values generated from the route's own schema (so a 401/404 is never a 400 in disguise).
 */
const svc = await createTestService();
afterAll(() => svc.close());

// --- The route list ----------------------------------------------------------------------------

const { doc, routes } = await documentedRoutes(svc);
type Route = DocumentedRoute;
const protectedRoutes = routes.filter((r) => r.credential !== null);
const apiKeyRoutes = routes.filter((r) => r.credential === "apiKey");
const sessionRoutes = routes.filter((r) => r.credential === "session");
/** /v1 routes that address one thread by a path parameter. */
const threadParam = (r: Route) =>
  (r.op.parameters ?? []).find(
    (p) => p.in === "path" && (p.name === "threadId" || (p.name === "id" && /^\/v1\/threads\/\{id\}/.test(r.path))),
  );
const threadRoutes = apiKeyRoutes.filter((r) => threadParam(r) !== undefined);

// --- Request building from the route's schemas -------------------------------------------------

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  const name = schema.$ref.split("/").pop()!;
  return resolve(doc.components?.schemas?.[name] ?? {});
}

/** A minimal value the schema accepts: required properties only, lowest allowed numbers. */
function sample(input: Schema, name = ""): unknown {
  const schema = resolve(input);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map((s) => sample(s, name)));
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return sample(alternatives.find((s) => resolve(s).type !== "null") ?? alternatives[0], name);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "object": {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key] ?? {}, key);
      return out;
    }
    case "array":
      return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items ?? {}, name));
    case "integer":
    case "number": {
      const low = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
      return Math.min(Math.max(low, 1), schema.maximum ?? Number.MAX_SAFE_INTEGER);
    }
    case "boolean":
      return true;
    case "string":
      if (schema.format === "date-time") return new Date().toISOString();
      if (schema.format === "date") return new Date().toISOString().slice(0, 10);
      return name === "dataset" ? "security-dataset" : "x".repeat(Math.max(schema.minLength ?? 1, 1));
    default:
      return {};
  }
}

/** Real resources of a tenant, to put in path parameters. */
interface Resources {
  projectId: string;
  key: string;
  keyId: string;
  threadId: string;
  dataset: string;
  userId: string;
}

async function tenantWithResources(): Promise<Resources> {
  const t = await newTenant(svc, `sec-${randomUUID().slice(0, 6)}`);
  const dataset = "security-dataset";
  const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset } });
  expect(res.status).toBe(201);
  const { threadId } = (await res.json()) as { threadId: string };
  // A real dashboard user (inserted directly: nobody signs in as them, so no scrypt cost).
  const userId = newId("usr");
  const now = svc.deps.clock.now();
  await svc.deps.db.insert(users).values({
    id: userId,
    username: `victim-${userId}`,
    passwordHash: "scrypt$unused",
    createdAt: now,
    updatedAt: now,
  });
  return { ...t, threadId, dataset, userId };
}

function paramValue(route: Route, param: Parameter, r: Resources): string {
  if (param === threadParam(route)) return r.threadId;
  if (param.name === "projectId") return r.projectId;
  if (param.name === "dataset") return r.dataset;
  const segment = route.path.split("/").at(route.path.split("/").indexOf(`{${param.name}}`) - 1);
  if (segment === "projects") return r.projectId;
  if (segment === "api-keys") return r.keyId;
  if (segment === "users") return r.userId;
  if (segment === "threads") return r.threadId;
  return String(sample(param.schema, param.name));
}

function buildUrl(route: Route, r: Resources): string {
  let path = route.path;
  const query = new URLSearchParams();
  for (const param of route.op.parameters ?? []) {
    if (param.in === "path") path = path.replace(`{${param.name}}`, encodeURIComponent(paramValue(route, param, r)));
    else if (param.in === "query" && param.required) query.set(param.name, paramValue(route, param, r));
  }
  const qs = query.toString();
  return qs ? `${path}?${qs}` : path;
}

function buildBody(route: Route): unknown {
  const schema = route.op.requestBody?.content["application/json"]?.schema;
  return schema ? sample(schema) : undefined;
}

/** Send the route's request (a valid one unless `bare`) with the given Authorization header. */
async function call(route: Route, r: Resources, authorization?: string, bare = false): Promise<Response> {
  const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
  const body = bare ? undefined : buildBody(route);
  const res = await svc.request(buildUrl(route, r), { method: route.method, headers, json: body });
  expect(res.status, `${route.label} must never answer 403`).not.toBe(403);
  return res;
}

async function expect401(route: Route, res: Response, message: string) {
  const text = await res.text();
  expect({ route: route.label, status: res.status, body: text }).toEqual({
    route: route.label,
    status: 401,
    body: JSON.stringify({ error: message }),
  });
}

const wrongCredentialMessage = (route: Route) =>
  route.credential === "apiKey" ? "Invalid API key" : "Invalid session";

/** Users made to be deleted share one password hash, computed once (scrypt is slow on purpose). */
const GONE_PASSWORD = "gone-password";
const GONE_PASSWORD_HASH = hashPassword(GONE_PASSWORD);

async function adminToken() {
  return (await login(svc.deps, ADMIN.username, ADMIN.password)).token;
}

// --- The suite ---------------------------------------------------------------------------------

describe("the route list", () => {
  it("is read from the OpenAPI document and covers both surfaces", () => {
    const labels = routes.map((r) => r.label);
    expect(labels).toEqual(expect.arrayContaining(["POST /v1/threads", "GET /auth/me", "GET /dashboard/projects"]));
    expect(apiKeyRoutes.length).toBeGreaterThanOrEqual(8);
    expect(sessionRoutes.length).toBeGreaterThanOrEqual(14);
    expect(threadRoutes.length).toBeGreaterThanOrEqual(7);
  });

  it("declares exactly /health and /auth/login as public", () => {
    expect(routes.filter((r) => r.credential === null).map((r) => r.label)).toEqual([
      "GET /health",
      "POST /auth/login",
    ]);
  });

  it("declares the API key on /v1 and the session everywhere else", () => {
    for (const r of protectedRoutes) {
      expect({ route: r.label, credential: r.credential }).toEqual({
        route: r.label,
        credential: r.path.startsWith("/v1/") ? "apiKey" : "session",
      });
    }
  });
});

describe("public routes", () => {
  it("answer without any credential", async () => {
    const health = await svc.request("/health");
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok", services: { postgres: "ok" } });
    const openapi = await svc.request("/openapi.json");
    expect(openapi.status).toBe(200);
    expect(((await openapi.json()) as OpenApiDoc).paths["/v1/threads"]).toBeDefined();
    const docs = await svc.request("/docs");
    expect(docs.status).toBe(200);
    expect(docs.headers.get("content-type")).toMatch(/text\/html/);
    const signIn = await svc.request("/auth/login", {
      method: "POST",
      json: { username: ADMIN.username, password: ADMIN.password },
    });
    expect(signIn.status).toBe(200);
  });

  it("/auth/login ignores any Authorization header and only checks the password", async () => {
    const t = await newTenant(svc);
    for (const authorization of [undefined, "Basic xyz", `Bearer ${t.key}`]) {
      const res = await svc.request("/auth/login", {
        method: "POST",
        headers: authorization ? { authorization } : {},
        json: { username: ADMIN.username, password: "wrong-password" },
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: "Invalid username or password" });
    }
  });
});

describe.each(protectedRoutes)("$label", (route) => {
  it("answers 401 Missing or invalid Authorization header without a usable header (before validating)", async () => {
    const r = await tenantWithResources();
    const malformed = [undefined, "", "Basic xyz", `Basic ${r.key}`, "Bearer", "Bearer ", `Token ${r.key}`, r.key];
    for (const authorization of malformed) {
      await expect401(route, await call(route, r, authorization, true), "Missing or invalid Authorization header");
    }
  });

  it("answers 401 for an unknown credential of its own kind", async () => {
    const r = await tenantWithResources();
    const unknown =
      route.credential === "apiKey"
        ? `mk_${randomBytes(32).toString("hex")}`
        : `mk_sess_${randomBytes(32).toString("base64url")}`;
    await expect401(route, await call(route, r, `Bearer ${unknown}`), wrongCredentialMessage(route));
    await expect401(route, await call(route, r, "Bearer not-a-credential"), wrongCredentialMessage(route));
  });

  it("answers 401 for the other surface's valid credential", async () => {
    const r = await tenantWithResources();
    const other = route.credential === "apiKey" ? await adminToken() : r.key;
    await expect401(route, await call(route, r, `Bearer ${other}`), wrongCredentialMessage(route));
  });
});

describe.each(apiKeyRoutes)("$label with a dead API key", (route) => {
  it("answers 401 API key has been revoked, immediately after revocation", async () => {
    const r = await tenantWithResources();
    const mine = await newTenant(svc);
    await revokeApiKey(svc.deps, { apiKeyId: mine.keyId });
    await expect401(route, await call(route, r, `Bearer ${mine.key}`), "API key has been revoked");
  });

  it("answers 401 API key is not linked to a project for an orphaned key", async () => {
    const r = await tenantWithResources();
    const mine = await newTenant(svc);
    await svc.deps.db.update(apiKeys).set({ projectId: null }).where(eq(apiKeys.id, mine.keyId));
    await expect401(route, await call(route, r, `Bearer ${mine.key}`), "API key is not linked to a project");
  });
});

describe.each(sessionRoutes)("$label with a dead session", (route) => {
  it("answers 401 Session has been revoked after logout", async () => {
    const r = await tenantWithResources();
    const token = await adminToken();
    expect((await svc.request("/auth/logout", { method: "POST", token })).status).toBe(204);
    await expect401(route, await call(route, r, `Bearer ${token}`), "Session has been revoked");
  });

  it("answers 401 Session has expired past its expiry", async () => {
    const r = await tenantWithResources();
    const token = await adminToken();
    await svc.deps.db
      .update(sessions)
      .set({ expiresAt: new Date(Date.now() - 1) })
      .where(eq(sessions.tokenHash, hashToken(token)));
    await expect401(route, await call(route, r, `Bearer ${token}`), "Session has expired");
  });

  it("answers 401 Session user no longer exists once the user is deleted", async () => {
    const r = await tenantWithResources();
    const username = `gone-${randomUUID().slice(0, 8)}`;
    const userId = newId("usr");
    const now = svc.deps.clock.now();
    await svc.deps.db
      .insert(users)
      .values({ id: userId, username, passwordHash: await GONE_PASSWORD_HASH, createdAt: now, updatedAt: now });
    const token = (await login(svc.deps, username, GONE_PASSWORD)).token;
    const [admin] = await svc.deps.db.select().from(users).where(eq(users.username, ADMIN.username));
    await deleteUser(svc.deps, { actingUserId: admin.id, userId });
    await expect401(route, await call(route, r, `Bearer ${token}`), "Session user no longer exists");
  });
});

describe.each(threadRoutes)("$label across tenants", (route) => {
  it("answers 404 Thread not found for another project's thread, and works on its own", async () => {
    const theirs = await tenantWithResources();
    const mine = await tenantWithResources();
    const foreign = await call(route, { ...mine, threadId: theirs.threadId }, `Bearer ${mine.key}`);
    expect({ route: route.label, status: foreign.status, body: await foreign.text() }).toEqual({
      route: route.label,
      status: 404,
      body: JSON.stringify({ error: "Thread not found" }),
    });
    // Control: the same request on the caller's own thread is accepted, so the 404 above is
    // the tenant check and not a validation or routing failure.
    const own = await call(route, mine, `Bearer ${mine.key}`);
    expect({ route: route.label, refused: [400, 401, 403, 404].includes(own.status) }).toEqual({
      route: route.label,
      refused: false,
    });
    // And the other tenant's thread is unchanged and still theirs.
    const check = await svc.request(`/v1/threads/${theirs.threadId}`, { token: theirs.key });
    expect(check.status).toBe(200);
    expect(await check.json()).toMatchObject({ threadId: theirs.threadId, messageCount: 0, endedAt: null, tags: [] });
  });
});

describe("conversation evidence across tenants", () => {
  it("never makes another project's messages recall candidates, in a dataset of the same name", async () => {
    const theirs = await tenantWithResources();
    const mine = await tenantWithResources();
    const said = await svc.request(`/v1/memory/working/threads/${theirs.threadId}/messages`, {
      method: "POST",
      token: theirs.key,
      json: { role: "user", content: "my passphrase is zanzibar" },
    });
    expect(said.status).toBe(201);
    const recall = async (key: string, body: object) => {
      const res = await svc.request("/v1/memory/recall", {
        method: "POST",
        token: key,
        json: { dataset: mine.dataset, include: ["messages"], ...body },
      });
      expect(res.status).toBe(200);
      return (await res.json()) as { context: string; messages: { content: string }[] };
    };
    for (const body of [{ query: "zanzibar passphrase" }, {}]) {
      const r = await recall(mine.key, body);
      expect({ body, messages: r.messages, context: r.context }).toEqual({ body, messages: [], context: "" });
      // Control: the owner recalls it, so the empty answer above is the tenant filter.
      expect((await recall(theirs.key, body)).messages.map((m) => m.content)).toEqual(["my passphrase is zanzibar"]);
    }
  });
});

describe("CORS", () => {
  it("answers the dashboard origin's preflight without a credential and ignores other origins", async () => {
    const preflight = (origin: string) =>
      svc.request("/dashboard/projects", {
        method: "OPTIONS",
        headers: {
          origin,
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization, content-type",
        },
      });
    const allowed = await preflight("http://dashboard.test");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("http://dashboard.test");
    expect(allowed.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("authorization");
    const foreign = await preflight("http://evil.test");
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();
    // A credentialed request from another origin still gets no CORS grant.
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      headers: { origin: "http://evil.test" },
      json: { dataset: "d" },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});

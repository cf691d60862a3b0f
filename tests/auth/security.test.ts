import { randomBytes, randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { revokeApiKey } from "../../lib/api-keys";
import { login } from "../../lib/auth";
import { hashPassword, hashToken } from "../../lib/crypto";
import { apiKeys, sessions, users } from "../../lib/db/schema";
import { newId } from "../../lib/ids";
import { deleteUser } from "../../lib/users";
import { type CredentialCase, deadCredentials, MISSING, makeCredentials } from "../helpers/credentials";
import { tableCounts } from "../helpers/db-state";
import { startFakeOpenAI } from "../helpers/fake-openai";
import {
  API_PATH,
  type DocumentedRoute,
  documentedRoutes,
  type OpenApiDoc,
  type Parameter,
  type Schema,
} from "../helpers/openapi";
import { ADMIN, createTestService, newTenant } from "../helpers/service";

/**
 * One security suite over every route the app documents, and the one place for who reaches which
 * route: the route list (read from GET /openapi.json, so a new route is covered as soon as it
 * exists; every route the app serves is documented), the public routes, CORS, and every protected
 * route's answer to a missing, malformed, unknown, foreign or dead credential (revoked or orphaned
 * key; logged-out, expired or deleted user's session), then isolation between tenants. Path
 * parameters are filled with the ids of another tenant's real resources, bodies and required query
 * parameters with values generated from the route's own schema (so a 401/404 is never a 400 in
 * disguise); the same credentials are also sent with a body no route accepts (so the 401 comes
 * before validation) and must write nothing. Mutated credentials: tests/auth/fuzz-auth.test.ts;
 * authentication before every other check: tests/auth/auth-first.test.ts.
 */
const svc = await createTestService({ manualTime: true });
afterAll(() => svc.close());
const clock = svc.clock as NonNullable<typeof svc.clock>;
/** Live, dead and foreign credentials made once (the clock moves 7 days for the expired one). */
const credentials = await makeCredentials(svc, "security");

// --- The route list ----------------------------------------------------------------------------

const { doc, routes } = await documentedRoutes(svc);
type Route = DocumentedRoute;
const protectedRoutes = routes.filter((r): r is Route & { credential: "apiKey" | "session" } => r.credential !== null);
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

/** The route's URL with a placeholder in every path and required query parameter. */
function placeholderUrl(route: Route): string {
  let url = route.path;
  const query = new URLSearchParams();
  for (const p of route.op.parameters ?? []) {
    if (p.in === "path") url = url.replace(`{${p.name}}`, "fz-x");
    else if (p.in === "query" && p.required) query.set(p.name, "fz-x");
  }
  return query.size > 0 ? `${url}?${query}` : url;
}

/** A credential case on a body the route would reject: the exact 401, JSON, and nothing written. */
async function expectRefusedFirst(route: Route, c: CredentialCase) {
  const headers: Record<string, string> = {};
  if (c.header !== undefined) headers.authorization = c.header;
  const body = route.method === "GET" ? undefined : JSON.stringify({ junk: true });
  if (body) headers["content-type"] = "application/json";
  const before = await tableCounts(svc.deps.db);
  const res = await svc.app.request(placeholderUrl(route), { method: route.method, headers, body });
  const text = await res.text();
  const where = `${route.label} with ${c.name}: ${JSON.stringify(c.header)}`;
  expect({ status: res.status, body: text }, where).toEqual({
    status: 401,
    body: JSON.stringify({ error: c.message }),
  });
  expect(res.headers.get("content-type"), where).toMatch(/^application\/json/);
  expect(await tableCounts(svc.deps.db), `${where}: a 401 writes nothing`).toEqual(before);
}

/** An error answer: JSON `{error}` with a message. */
async function errorBody(res: Response) {
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const b = (await res.json()) as { error: unknown };
  expect(typeof b.error).toBe("string");
  expect((b.error as string).length).toBeGreaterThan(0);
  return b as { error: string };
}

/** Users made to be deleted share one password hash, computed once (scrypt is slow on purpose). */
const GONE_PASSWORD = "gone-password";
const GONE_PASSWORD_HASH = hashPassword(GONE_PASSWORD);

async function adminToken() {
  return (await login(svc.deps, ADMIN.username, ADMIN.password)).token;
}

// --- The suite ---------------------------------------------------------------------------------

/** The API reference as served. */
async function openApiDocument() {
  const res = await svc.request("/openapi.json");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  return (await res.json()) as OpenApiDoc;
}

/** /v1 routes of the spec that must be documented with the API key scheme. */
const v1Routes = [
  ["post", "/v1/threads"],
  ["get", "/v1/threads/{id}"],
  ["patch", "/v1/threads/{id}"],
  ["post", "/v1/threads/{id}/end"],
  ["post", "/v1/memory/working/threads/{threadId}/messages"],
  ["get", "/v1/memory/working/threads/{threadId}/messages"],
  ["post", "/v1/memory/working/threads/{threadId}/prepare"],
  ["get", "/v1/memory/working/threads/{threadId}/stats"],
];

describe("the route list", () => {
  it("is read from the OpenAPI document and covers both surfaces", () => {
    const labels = routes.map((r) => r.label);
    expect(labels).toEqual(
      expect.arrayContaining([
        "POST /v1/threads",
        "GET /auth/me",
        "POST /auth/logout",
        "GET /dashboard/projects",
        "POST /v1/memory/recall",
      ]),
    );
    expect(apiKeyRoutes.length).toBeGreaterThanOrEqual(8);
    expect(apiKeyRoutes.length).toBeGreaterThanOrEqual(20);
    expect(sessionRoutes.length).toBeGreaterThanOrEqual(14);
    expect(threadRoutes.length).toBeGreaterThanOrEqual(7);
    // tests/auth/auth-first.test.ts puts a NUL in path parameters: enough routes have one.
    const withPathParameter = protectedRoutes.filter((r) => (r.op.parameters ?? []).some((p) => p.in === "path"));
    expect(withPathParameter.length).toBeGreaterThanOrEqual(20);
  });

  it("covers /v1, /dashboard and /auth among the routes the input fuzz sends (tests/api/fuzz.test.ts)", () => {
    const fuzzed = routes.filter((r) => API_PATH.test(r.path));
    expect(fuzzed.filter((r) => r.path.startsWith("/v1/")).length).toBeGreaterThanOrEqual(20);
    expect(fuzzed.filter((r) => r.path.startsWith("/dashboard/")).length).toBeGreaterThanOrEqual(12);
    expect(fuzzed.map((r) => r.label)).toEqual(
      expect.arrayContaining(["POST /auth/login", "GET /auth/me", "POST /auth/logout", "POST /v1/memory/recall"]),
    );
  });

  it("is OpenAPI 3.1 with both security schemes", async () => {
    const d = await openApiDocument();
    expect(d.openapi).toBe("3.1.0");
    expect(d.info?.title.length).toBeGreaterThan(0);
    expect(Object.keys(d.components?.securitySchemes ?? {}).sort()).toEqual(["apiKey", "session"]);
  });

  it.each(v1Routes)("documents %s %s with the API key scheme", async (method, path) => {
    const op = (await openApiDocument()).paths[path]?.[method];
    expect(op, `${method} ${path}`).toBeDefined();
    expect(op.security).toEqual([{ apiKey: [] }]);
    expect(Object.keys(op.responses ?? {})).toContain("401");
  });

  it("documents every /v1, /dashboard and /auth route the app serves", async () => {
    const d = await openApiDocument();
    // The dashboard UI's own files (/dashboard/ and /dashboard/assets/*) are pages, not API; so are
    // the redirects of the page's file name to it.
    const uiFiles = new Set(["/dashboard/", "/dashboard/assets/*", "/dashboard/index.html", "/dashboard/index"]);
    const served = new Set(
      svc.app.routes
        .filter((r) => r.method !== "ALL" && /^\/(v1|dashboard|auth)\//.test(r.path) && !uiFiles.has(r.path))
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/\/:(\w+)/g, "/{$1}")}`),
    );
    expect(served.size).toBeGreaterThanOrEqual(v1Routes.length);
    for (const [method, path] of v1Routes) expect(served).toContain(`${method} ${path}`);
    const documented = new Set(
      Object.entries(d.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)),
    );
    const missing = [...served].filter((r) => !documented.has(r));
    expect(missing).toEqual([]);
    expect([...served].some((r) => r.includes(" /dashboard/"))).toBe(true);
    for (const route of served) {
      if (!route.includes(" /dashboard/")) continue;
      const [method, path] = route.split(" ");
      expect(d.paths[path][method].security, route).toEqual([{ session: [] }]);
    }
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

  it("serves an HTML reference at /docs that loads /openapi.json", async () => {
    const res = await svc.request("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/i);
    expect(html).toContain("/openapi.json");
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

describe("authentication on /v1", () => {
  it("answers 401 {error} without a key and with an unknown key", async () => {
    const none = await svc.request("/v1/threads", { method: "POST", json: { dataset: "d" } });
    expect(none.status).toBe(401);
    expect(await errorBody(none)).toEqual({ error: "Missing or invalid Authorization header" });
    const bad = await svc.request("/v1/threads", {
      method: "POST",
      token: `mk_${"0".repeat(64)}`,
      json: { dataset: "d" },
    });
    expect(bad.status).toBe(401);
    expect(await errorBody(bad)).toEqual({ error: "Invalid API key" });
  });
});

describe.each(protectedRoutes)("$label", (route) => {
  it("answers every dead or foreign credential with its own 401 message, before validation, writing nothing", async () => {
    for (const c of deadCredentials(credentials, route.credential)) await expectRefusedFirst(route, c);
    await expectRefusedFirst(route, { name: "no header", header: undefined, message: MISSING });
  });

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
      .set({ expiresAt: new Date(clock.now().getTime() - 1) })
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

describe("query embeddings across tenants", () => {
  it("are kept per tenant: another project's recall of the same words is neither free nor told cached", async () => {
    const fake = await startFakeOpenAI();
    const withModel = await createTestService({ provider: fake });
    try {
      const victim = await newTenant(withModel, `sec-${randomUUID().slice(0, 6)}`);
      const asker = await newTenant(withModel, `sec-${randomUUID().slice(0, 6)}`);
      const recall = async (key: string) => {
        const res = await withModel.request("/v1/memory/recall", {
          method: "POST",
          token: key,
          json: { dataset: "ds", query: "I was diagnosed with lymphoma last week" },
        });
        expect(res.status).toBe(200);
        return res.headers.get("server-timing") ?? "";
      };
      await recall(victim.key);
      const guessed = await recall(asker.key);
      expect(guessed).toContain("embedding;dur=");
      expect(guessed).not.toContain('desc="cached"');
      expect(fake.embeddingCalls()).toHaveLength(2);
      // Within a tenant the repeat is still kept.
      expect(await recall(asker.key)).toContain('desc="cached"');
      expect(fake.embeddingCalls()).toHaveLength(2);
    } finally {
      await withModel.close();
      await fake.close();
    }
  });
});

/** CORS_ORIGIN of the test service. */
const ALLOWED_ORIGIN = "http://dashboard.test";

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

  it("answers a preflight from the allowed origin", async () => {
    const res = await svc.request("/v1/threads", {
      method: "OPTIONS",
      headers: {
        origin: ALLOWED_ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);
    expect(res.headers.get("access-control-allow-methods")).toMatch(/POST/);
    expect(res.headers.get("access-control-allow-methods")).toMatch(/PATCH/);
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toMatch(/authorization/);
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toMatch(/content-type/);
  });

  it("gives a preflight from another origin no allow-origin", async () => {
    const res = await svc.request("/v1/threads", {
      method: "OPTIONS",
      headers: { origin: "http://evil.test", "access-control-request-method": "POST" },
    });
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("sets allow-origin on actual requests from the allowed origin, errors included", async () => {
    const t = await newTenant(svc);
    const ok = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      json: { dataset: "cors" },
      headers: { origin: ALLOWED_ORIGIN },
    });
    expect(ok.status).toBe(201);
    expect(ok.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);
    expect(ok.headers.get("vary")?.toLowerCase()).toMatch(/origin/);

    const health = await svc.request("/health", { headers: { origin: ALLOWED_ORIGIN } });
    expect(health.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);

    const unauthorized = await svc.request("/v1/threads", {
      method: "POST",
      json: {},
      headers: { origin: ALLOWED_ORIGIN },
    });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);

    const invalid = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      json: { dataset: "" },
      headers: { origin: ALLOWED_ORIGIN },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);
  });

  it("sets no allow-origin for another origin or no origin", async () => {
    const t = await newTenant(svc);
    const other = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      json: { dataset: "cors" },
      headers: { origin: "http://evil.test" },
    });
    expect(other.status).toBe(201);
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const none = await svc.request("/health");
    expect(none.headers.get("access-control-allow-origin")).toBeNull();
    const similar = await svc.request("/health", { headers: { origin: `${ALLOWED_ORIGIN}.evil.test` } });
    expect(similar.headers.get("access-control-allow-origin")).toBeNull();
  });
});

import { afterAll, describe, expect, it } from "vitest";
import { MAX_BODY_BYTES } from "../../functions/app";
import { BATCH_PATH, MAX_BATCH_BODY_BYTES } from "../../functions/working/batch";
import { revokeApiKey } from "../../lib/api-keys";
import { tableCounts } from "../helpers/db-state";
import { documentedRoutes } from "../helpers/openapi";
import { adminSession, createTestService, newTenant } from "../helpers/service";

/**
 * Authentication comes first on every protected route of the OpenAPI document: a request without
 * a valid credential gets the spec's exact 401 message, whatever else is wrong with it (a NUL in
 * a path parameter or in the query, an oversized body, a body that would not validate). A Bearer
 * header whose credential is junk (inner spaces, control characters, a literal "%00") is an
 * unknown credential, not a malformed header. A method and path that no route answers is 404 for
 * everyone, without looking any credential up. The route list itself is checked in
 * tests/auth/security.test.ts.
 */
const statements: string[] = [];
const svc = await createTestService({ onQuery: (sql) => statements.push(sql) });
afterAll(() => svc.close());

const MISSING = "Missing or invalid Authorization header";

const tenant = await newTenant(svc, "auth-first");
const revoked = await newTenant(svc, "auth-first-revoked");
await revokeApiKey(svc.deps, { apiKeyId: revoked.keyId });
const session = await adminSession(svc);

interface Route {
  method: string;
  label: string;
  /** The route's URL with a placeholder in every path parameter and required query parameter. */
  url: (pathValue: string) => string;
  credential: "apiKey" | "session";
}

const routes: Route[] = (await documentedRoutes(svc)).routes.flatMap(({ method, path, label, op, credential }) => {
  if (credential === null) return [];
  const url = (pathValue: string) => {
    let u = path;
    const query = new URLSearchParams();
    for (const p of op.parameters ?? []) {
      if (p.in === "path") u = u.replace(`{${p.name}}`, pathValue);
      else if (p.in === "query" && p.required) query.set(p.name, "af-x");
    }
    return query.size > 0 ? `${u}?${query}` : u;
  };
  return [{ method, label, url, credential }];
});

const own = (route: Route) => (route.credential === "apiKey" ? tenant.key : session);
const unknownMessage = (route: Route) => (route.credential === "apiKey" ? "Invalid API key" : "Invalid session");
/** A live credential with a space, a tab, a control character or a literal "%00" inside. */
const junkCredentials = (route: Route) => {
  const t = own(route);
  return [
    `${t.slice(0, 12)} ${t.slice(12)}`,
    `${t.slice(0, 12)}\t${t.slice(12)}`,
    `${t} ${t}`,
    `${t} x`,
    "abc def",
    `${t.slice(0, 12)}\u0001${t.slice(12)}`,
    `${t}\u007f`,
    `${t.slice(0, 12)}%00${t.slice(12)}`,
    "%00",
    `${t}\u00ff`,
  ];
};

/** NUL characters, percent-encoded, in every path parameter and/or in the query string. */
function nulUrls(route: Route): string[] {
  const withQuery = (u: string) => `${u}${u.includes("?") ? "&" : "?"}nul=a%00b`;
  const urls = [withQuery(route.url("af-x"))];
  if (route.url("P") !== route.url("Q")) urls.push(route.url("a%00b"), route.url("%00"), withQuery(route.url("%00")));
  return urls;
}

async function send(route: Route, url: string, authorization: string | undefined, body?: string) {
  const headers: Record<string, string> = {};
  if (authorization !== undefined) headers.authorization = authorization;
  // A JSON body the route would reject: a 401 proves authentication ran before validation.
  const payload = body ?? (route.method === "GET" ? undefined : JSON.stringify({ junk: true }));
  if (payload !== undefined) {
    headers["content-type"] = "application/json";
    // As a client sends it (the body limit answers a declared length without reading the body).
    headers["content-length"] = String(Buffer.byteLength(payload));
  }
  const res = await svc.app.request(url, { method: route.method, headers, body: payload });
  return { status: res.status, body: await res.text() };
}

async function expect401(route: Route, url: string, authorization: string | undefined, message: string, body?: string) {
  const where = `${route.label} as ${url} with ${JSON.stringify(authorization)}`;
  expect(await send(route, url, authorization, body), where).toEqual({
    status: 401,
    body: JSON.stringify({ error: message }),
  });
}

describe.each(routes)("$label", (route) => {
  it("answers a Bearer credential with spaces, control characters or %00 inside with the unknown-credential 401", async () => {
    const before = await tableCounts(svc.deps.db);
    for (const junk of junkCredentials(route)) {
      await expect401(route, route.url("af-x"), `Bearer ${junk}`, unknownMessage(route));
      await expect401(route, route.url("af-x"), ` Bearer \t${junk} \t`, unknownMessage(route));
    }
    expect(await tableCounts(svc.deps.db)).toEqual(before);
  });

  it("answers 401 before looking at a NUL in the path or the query", async () => {
    for (const url of nulUrls(route)) {
      await expect401(route, url, undefined, MISSING);
      await expect401(route, url, "Basic abc", MISSING);
      await expect401(route, url, "Bearer abc def", unknownMessage(route));
      await expect401(route, url, "Bearer a%00b", unknownMessage(route));
      await expect401(route, url, `Bearer ${own(route)}\u0001`, unknownMessage(route));
      if (route.credential === "apiKey")
        await expect401(route, url, `Bearer ${revoked.key}`, "API key has been revoked");
      else await expect401(route, url, `Bearer ${tenant.key}`, "Invalid session");
      // Control: with its credential the same request is refused for the NUL, never a 401 or a 500.
      const authenticated = await send(route, url, `Bearer ${own(route)}`);
      expect([400, 404], `${route.label} as ${url}: ${authenticated.body}`).toContain(authenticated.status);
    }
  });
});

describe.each(routes.filter((r) => r.method !== "GET"))("$label with an oversized body", (route) => {
  it("answers 401 before the body limit", async () => {
    // The message batch routes take up to 5 MB (functions/working/batch.ts).
    const limit = BATCH_PATH.test(route.url("af-x")) ? MAX_BATCH_BODY_BYTES : MAX_BODY_BYTES;
    const oversized = JSON.stringify({ junk: "x".repeat(limit) });
    await expect401(route, route.url("af-x"), undefined, MISSING, oversized);
    await expect401(route, route.url("af-x"), "Bearer a b", unknownMessage(route), oversized);
    // Control: with its credential, the limit answers.
    expect((await send(route, route.url("af-x"), `Bearer ${own(route)}`, oversized)).status).toBe(413);
  });
});

describe("unknown routes", () => {
  const unknown: [string, string][] = [
    ["GET", "/nope"],
    ["GET", "/v1"],
    ["GET", "/v1/nope"],
    ["POST", "/v1/nothing/here"],
    ["GET", "/v1/memory/working/threads"],
    ["GET", "/v1/memory/working/threads/x/unknown"],
    ["GET", "/v1/memory/working/threads/%00/unknown"],
    ["PUT", "/v1/threads"],
    ["DELETE", "/v1/threads/thr_x"],
    ["GET", "/v1/threads/a%00b/nope?x=%00"],
    ["GET", "/dashboard/nope"],
    ["PUT", "/dashboard/projects"],
    ["GET", "/auth/nope"],
    ["GET", "/auth/logout"],
  ];

  it.each(unknown)("%s %s is 404 for everyone, without a credential lookup", async (method, path) => {
    for (const authorization of [undefined, "Bearer abc def", "Basic x", `Bearer ${tenant.key}`, `Bearer ${session}`]) {
      statements.length = 0;
      const res = await svc.app.request(path, { method, headers: authorization ? { authorization } : {} });
      expect({ status: res.status, body: await res.text() }, `${method} ${path} with ${authorization}`).toEqual({
        status: 404,
        body: JSON.stringify({ error: "Not found" }),
      });
      expect(statements, `${method} ${path}: no statement`).toEqual([]);
    }
  });
});

describe("one credential lookup per request", () => {
  it("checks the credential once although the route's own chain declares the check too", async () => {
    const lookups = () => statements.filter((s) => /^update "(api_keys|sessions)"/i.test(s.trim())).length;
    statements.length = 0;
    expect((await svc.request("/v1/threads/thr_missing", { token: tenant.key })).status).toBe(404);
    expect(lookups()).toBe(1);
    statements.length = 0;
    expect((await svc.request("/auth/me", { token: session })).status).toBe(200);
    expect(lookups()).toBe(1);
    statements.length = 0;
    expect((await svc.request("/dashboard/projects", { token: session })).status).toBe(200);
    expect(lookups()).toBe(1);
  });
});

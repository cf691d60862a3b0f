import { count, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_BODY_BYTES } from "../../functions/app";
import { messages, threads } from "../../lib/db/schema";
import type { OpenApiDoc, Schema } from "../helpers/openapi";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * Request handling on the app: unknown routes, request bodies (malformed JSON, content types, the
 * body limit), dataset names and percent-encoding. The route list, the API reference, CORS and
 * every 401 are in tests/auth/security.test.ts.
 */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc.close());

const W = "/v1/memory/working/threads";

async function errorBody(res: Response) {
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const b = (await res.json()) as { error: unknown };
  expect(typeof b.error).toBe("string");
  expect((b.error as string).length).toBeGreaterThan(0);
  return b as { error: string; issues?: { code: string; path: (string | number)[]; message: string }[] };
}

async function tenantWithThread(dataset = "http") {
  const t = await newTenant(svc);
  const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset } });
  expect(res.status).toBe(201);
  const { threadId } = (await res.json()) as { threadId: string };
  return { ...t, threadId };
}

async function threadCount(projectId: string) {
  const [{ n }] = await svc.deps.db.select({ n: count() }).from(threads).where(eq(threads.projectId, projectId));
  return n;
}

async function messageCount(projectId: string) {
  const [{ n }] = await svc.deps.db.select({ n: count() }).from(messages).where(eq(messages.projectId, projectId));
  return n;
}

/** A request with exactly these headers and this body (no JSON helper). */
function raw(
  path: string,
  init: { method?: string; token?: string; headers?: Record<string, string>; body?: BodyInit },
) {
  const headers = new Headers(init.headers);
  if (init.token) headers.set("authorization", `Bearer ${init.token}`);
  return svc.app.request(path, {
    method: init.method ?? "POST",
    headers,
    body: init.body,
    ...(init.body instanceof ReadableStream ? { duplex: "half" } : {}),
  } as RequestInit);
}

describe("unknown routes", () => {
  it.each([
    ["GET", "/nope"],
    ["GET", "/v1"],
    ["POST", "/v1/nothing/here"],
    ["GET", "/v1/memory/working/threads"],
    ["GET", "/v1/memory/working/threads/x/unknown"],
  ])("%s %s is 404 JSON {error}", async (method, path) => {
    // With a key or without (tests/auth/auth-first.test.ts): an unknown route is 404 for everyone.
    const t = await newTenant(svc);
    const res = await svc.request(path, { method, token: t.key });
    expect(res.status).toBe(404);
    expect(await errorBody(res)).toEqual({ error: "Not found" });
  });

  it("answers 404 JSON for a method a known path does not have", async () => {
    const t = await tenantWithThread();
    const res = await svc.request(`/v1/threads/${t.threadId}`, { method: "DELETE", token: t.key });
    expect(res.status).toBe(404);
    expect(await errorBody(res)).toEqual({ error: "Not found" });
    // The thread is still there.
    expect((await svc.request(`/v1/threads/${t.threadId}`, { token: t.key })).status).toBe(200);
  });
});

describe("request bodies", () => {
  it("answers 400 {error} for malformed JSON and writes nothing", async () => {
    const t = await tenantWithThread();
    for (const [path, body] of [
      ["/v1/threads", '{"dataset": "x"'],
      ["/v1/threads", "not json"],
      [`${W}/${t.threadId}/messages`, '{"role":"user","content":"x",}'],
      [`/v1/threads/${t.threadId}`, "{tags:[]}"],
    ]) {
      const method = path.startsWith("/v1/threads/") ? "PATCH" : "POST";
      const res = await raw(path, { method, token: t.key, headers: { "content-type": "application/json" }, body });
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(await errorBody(res)).toEqual({ error: "Malformed JSON in request body" });
    }
    expect(await threadCount(t.projectId)).toBe(1);
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("answers 400 Validation error for JSON that is not an object", async () => {
    const t = await newTenant(svc);
    for (const body of ["[1,2]", "null", '"dataset"', "42"]) {
      const res = await raw("/v1/threads", { token: t.key, headers: { "content-type": "application/json" }, body });
      expect(res.status).toBe(400);
      const b = await errorBody(res);
      expect(b.error).toBe("Validation error");
      expect(b.issues?.[0]).toMatchObject({ code: "invalid_type", path: [] });
    }
    expect(await threadCount(t.projectId)).toBe(0);
  });

  it("accepts application/json with a charset and in any case", async () => {
    const t = await newTenant(svc);
    for (const ct of ["application/json; charset=utf-8", "Application/JSON"]) {
      const res = await raw("/v1/threads", { token: t.key, headers: { "content-type": ct }, body: '{"dataset":"c"}' });
      expect(res.status).toBe(201);
    }
    expect(await threadCount(t.projectId)).toBe(2);
  });

  it.each([
    ["text/plain", "text/plain"],
    ["form-urlencoded", "application/x-www-form-urlencoded"],
    ["multipart", "multipart/form-data; boundary=xyz"],
    ["xml", "application/xml"],
  ])("answers 4xx {error} (not 500) for a %s body on a JSON route, writing nothing", async (_n, ct) => {
    const t = await tenantWithThread();
    for (const path of ["/v1/threads", `${W}/${t.threadId}/messages`, `${W}/${t.threadId}/prepare`]) {
      const json = path === "/v1/threads" ? '{"dataset":"x"}' : '{"role":"user","content":"x"}';
      const res = await raw(path, { token: t.key, headers: { "content-type": ct }, body: json });
      expect(res.status, path).toBe(415);
      expect(await errorBody(res)).toEqual({ error: "Unsupported Media Type" });
    }
    expect(await threadCount(t.projectId)).toBe(1);
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("reads a body in the charset its Content-Type declares (latin1's é stays é), and answers 415/400 for one it cannot read", async () => {
    const t = await tenantWithThread();
    const path = `${W}/${t.threadId}/messages`;
    const latin1 = Uint8Array.from(
      [...'{"role":"user","content":"Caf\u00e9 in S\u00e3o Paulo"}'].map((ch) => ch.charCodeAt(0)),
    );
    for (const ct of ["application/json; charset=latin1", "application/json; charset=ISO-8859-1"]) {
      const res = await raw(path, { token: t.key, headers: { "content-type": ct }, body: latin1 });
      expect(res.status, ct).toBe(201);
    }
    const stored = await svc.deps.db
      .select({ content: messages.content })
      .from(messages)
      .where(eq(messages.projectId, t.projectId));
    expect(stored.map((m) => m.content)).toEqual(["Caf\u00e9 in S\u00e3o Paulo", "Caf\u00e9 in S\u00e3o Paulo"]);

    const unknown = await raw(path, {
      token: t.key,
      headers: { "content-type": "application/json; charset=klingon" },
      body: latin1,
    });
    expect(unknown.status).toBe(415);
    expect(await errorBody(unknown)).toEqual({
      error: 'Unsupported charset "klingon" in Content-Type: send the body as UTF-8',
    });
    // A lone low surrogate is not UTF-16.
    const notUtf16 = await raw(path, {
      token: t.key,
      headers: { "content-type": "application/json; charset=utf-16le" },
      body: Uint8Array.from([0x7b, 0x00, 0x00, 0xdc]),
    });
    expect(notUtf16.status).toBe(400);
    expect(await errorBody(notUtf16)).toEqual({
      error: "Request body is not valid utf-16le, as its Content-Type says",
    });
    // Another media type is still refused as before.
    const text = await raw(path, {
      token: t.key,
      headers: { "content-type": "text/plain; charset=latin1" },
      body: latin1,
    });
    expect(text.status).toBe(415);
    expect(await messageCount(t.projectId)).toBe(2);
  });

  it("answers 415 for a body without any content type", async () => {
    const t = await tenantWithThread();
    const bytes = new TextEncoder().encode('{"role":"user","content":"x"}');
    const res = await raw(`${W}/${t.threadId}/messages`, { token: t.key, body: bytes });
    expect(res.status).toBe(415);
    await errorBody(res);
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("answers 400 Validation error for a required body that is missing", async () => {
    const t = await tenantWithThread();
    const res = await raw(`${W}/${t.threadId}/messages`, { token: t.key });
    expect(res.status).toBe(400);
    const b = await errorBody(res);
    expect(b.error).toBe("Validation error");
    expect(b.issues?.map((i) => i.path[0]).sort()).toEqual(["content", "role"]);
    expect(await messageCount(t.projectId)).toBe(0);
  });
});

describe("body size limit (1 MB)", () => {
  const oversized = JSON.stringify({ role: "user", content: "x".repeat(MAX_BODY_BYTES) });

  it("is 1 MB", () => {
    expect(MAX_BODY_BYTES).toBe(1024 * 1024);
  });

  it("answers 413 {error} without a Content-Length and writes nothing", async () => {
    const t = await tenantWithThread();
    const res = await raw(`${W}/${t.threadId}/messages`, {
      token: t.key,
      headers: { "content-type": "application/json" },
      body: oversized,
    });
    expect(res.status).toBe(413);
    expect(await errorBody(res)).toEqual({ error: "Request body too large (limit 1 MB)" });
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("answers 413 from the Content-Length header alone", async () => {
    const t = await tenantWithThread();
    const res = await raw(`${W}/${t.threadId}/messages`, {
      token: t.key,
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(oversized)) },
      body: oversized,
    });
    expect(res.status).toBe(413);
    await errorBody(res);
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("answers 413 for a streamed (chunked) body", async () => {
    const t = await tenantWithThread();
    const bytes = new TextEncoder().encode(oversized);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 64 * 1024) controller.enqueue(bytes.subarray(i, i + 64 * 1024));
        controller.close();
      },
    });
    const res = await raw(`${W}/${t.threadId}/messages`, {
      token: t.key,
      headers: { "content-type": "application/json" },
      body: stream,
    });
    expect(res.status).toBe(413);
    await errorBody(res);
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("counts bytes, not characters", async () => {
    const t = await tenantWithThread();
    // 600,000 characters, 1.2 MB in UTF-8.
    const res = await svc.request(`${W}/${t.threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: "user", content: "é".repeat(600_000) },
    });
    expect(res.status).toBe(413);
    expect(await messageCount(t.projectId)).toBe(0);
  });

  it("answers 413 on thread creation too", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", {
      method: "POST",
      token: t.key,
      json: { dataset: "d", tags: ["t"], pad: "p".repeat(MAX_BODY_BYTES) },
    });
    expect(res.status).toBe(413);
    await errorBody(res);
    expect(await threadCount(t.projectId)).toBe(0);
  });

  it("accepts a body just under the limit and stores it whole", async () => {
    const t = await tenantWithThread();
    const content = "y".repeat(MAX_BODY_BYTES - 100);
    const res = await svc.request(`${W}/${t.threadId}/messages`, {
      method: "POST",
      token: t.key,
      json: { role: "user", content },
    });
    expect(res.status).toBe(201);
    const page = (await (await svc.request(`${W}/${t.threadId}/messages`, { token: t.key })).json()) as {
      messages: { content: string }[];
    };
    expect(page.messages[0].content).toBe(content);
  });
});

describe("dataset names and percent-encoding", () => {
  const names = [
    "a/b/c",
    "with space",
    "100%",
    "%2F-stays-literal",
    "ünïcødé 🚀 数据",
    "?query#hash&x=1+2",
    "back\\slash",
    "'quoted' \"double\"",
    " leading and trailing ",
  ];

  it.each(names)("round-trips the dataset %j exactly", async (dataset) => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset } });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { threadId: string; dataset: string };
    expect(created.dataset).toBe(dataset);
    const got = (await (await svc.request(`/v1/threads/${created.threadId}`, { token: t.key })).json()) as {
      dataset: string;
    };
    expect(got.dataset).toBe(dataset);
    const prep = await svc.request(`${W}/${created.threadId}/prepare`, { method: "POST", token: t.key });
    expect(((await prep.json()) as { dataset: string }).dataset).toBe(dataset);
    const [row] = await svc.deps.db
      .select({ dataset: threads.dataset })
      .from(threads)
      .where(eq(threads.id, created.threadId));
    expect(row.dataset).toBe(dataset);
  });

  it("decodes percent-encoded path parameters", async () => {
    const t = await tenantWithThread();
    const encoded = t.threadId.replace("_", "%5F").replace(/^t/, "%74");
    const res = await svc.request(`/v1/threads/${encoded}`, { token: t.key });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { threadId: string }).threadId).toBe(t.threadId);
    const list = await svc.request(`${W}/${encoded}/messages`, { token: t.key });
    expect(list.status).toBe(200);
  });

  it("keeps an encoded slash inside the parameter", async () => {
    const t = await tenantWithThread();
    const res = await svc.request(`/v1/threads/${t.threadId}%2Fend`, { method: "POST", token: t.key });
    // Not routed to /end: the id "thr_…/end" simply does not exist.
    expect(res.status).toBe(404);
    const b = await errorBody(res);
    expect(["Thread not found", "Not found"]).toContain(b.error);
    const thread = (await (await svc.request(`/v1/threads/${t.threadId}`, { token: t.key })).json()) as {
      endedAt: string | null;
    };
    expect(thread.endedAt).toBeNull();
  });

  it("answers 404 (not 500) for a NUL in a path parameter", async () => {
    const t = await tenantWithThread();
    for (const path of [`/v1/threads/a%00b`, `${W}/x%00/messages`, `${W}/%00/stats`]) {
      const res = await svc.request(path, { token: t.key });
      expect(res.status, path).toBe(404);
      await errorBody(res);
    }
    // An encoded percent sign followed by 00 is the literal text "%00", not a NUL.
    const literal = await svc.request("/v1/threads/%2500", { token: t.key });
    expect(literal.status).toBe(404);
    expect(await errorBody(literal)).toEqual({ error: "Thread not found" });
    const query = await svc.request(`${W}/${t.threadId}/messages?limit=%2500`, { token: t.key });
    expect(query.status).toBe(400);
    expect((await errorBody(query)).issues?.[0]).toMatchObject({ path: ["limit"], code: "invalid_type" });
  });

  it("answers 400 Validation error (not 500) for a NUL in the query string", async () => {
    const t = await tenantWithThread();
    const res = await svc.request(`${W}/${t.threadId}/messages?order=%00asc`, { token: t.key });
    expect(res.status).toBe(400);
    const b = await errorBody(res);
    expect(b.error).toBe("Validation error");
    expect(b.issues?.[0].path).toEqual(["order"]);
  });

  it("answers 400 (not 500) when a NUL reaches the database through any route", async () => {
    // The schemas catch NUL in the fields they know; the error handler is the net behind them.
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "\u0000" } });
    expect(res.status).toBe(400);
    expect((await errorBody(res)).error).toBe("Validation error");
  });
});

describe("the OpenAPI document names what the body and path checks answer", () => {
  const documented = async () => {
    const doc = (await (await svc.request("/openapi.json")).json()) as OpenApiDoc;
    return {
      doc,
      operations: Object.entries(doc.paths).flatMap(([path, item]) =>
        Object.entries(item).map(([method, op]) => ({ path, method, op })),
      ),
    };
  };

  it("every operation with a body documents 413 and 415 and a 400 body that may lack issues; with path parameters, 404", async () => {
    const { doc, operations } = await documented();
    const withBody = operations.filter((o) => o.op.requestBody);
    expect(withBody.length).toBeGreaterThan(15);
    for (const { path, method, op } of withBody) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(Object.keys(op.responses ?? {}), where).toEqual(expect.arrayContaining(["400", "413", "415"]));
      // A body that is not JSON is a 400 of `error` alone: some 400 schema of the operation allows it.
      const responses = (op.responses ?? {}) as Record<string, { content: Record<string, { schema: Schema }> }>;
      const badRequest = responses["400"].content["application/json"].schema;
      expect(acceptsErrorAlone(doc, badRequest), where).toBe(true);
    }
    for (const { path, method, op } of operations.filter((o) => o.op.parameters?.some((p) => p.in === "path"))) {
      expect(Object.keys(op.responses ?? {}), `${method.toUpperCase()} ${path}`).toContain("404");
    }
  });

  it("answers each of them as documented: a body over 1 MB, an unknown charset, a body that is not JSON, a NUL in a path", async () => {
    const t = await newTenant(svc);
    const { doc } = await documented();
    const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses ?? {});
    const post = (headers: Record<string, string>, body: string) =>
      svc.request("/v1/threads", { method: "POST", token: t.key, headers, body });
    const tooBig = await post(
      { "content-type": "application/json" },
      JSON.stringify({ dataset: "x".repeat(MAX_BODY_BYTES) }),
    );
    const charset = await post({ "content-type": "application/json; charset=x-unknown" }, '{"dataset":"d"}');
    const notJson = await post({ "content-type": "application/json" }, '{"dataset":');
    expect([tooBig.status, charset.status, notJson.status]).toEqual([413, 415, 400]);
    expect(statuses("/v1/threads", "post")).toEqual(expect.arrayContaining(["400", "413", "415"]));
    expect(await notJson.json()).toEqual({ error: "Malformed JSON in request body" });
    const nul = await svc.request("/v1/memory/semantic/datasets/a%00b/facts", { token: t.key });
    expect(nul.status).toBe(404);
    expect(statuses("/v1/memory/semantic/datasets/{dataset}/facts", "get")).toContain("404");
  });
});

/** Whether a body `{error}` alone validates against `schema` (its $refs and anyOf followed). */
function acceptsErrorAlone(doc: OpenApiDoc, schema: Schema): boolean {
  const resolved = schema.$ref ? doc.components?.schemas?.[schema.$ref.split("/").at(-1) as string] : schema;
  if (!resolved) return false;
  const alternatives = resolved.anyOf ?? resolved.oneOf;
  if (alternatives) return alternatives.some((s) => acceptsErrorAlone(doc, s));
  const required = resolved.required ?? [];
  const error = resolved.properties?.error;
  return required.every((name) => name === "error") && error !== undefined && error.const === undefined && !error.enum;
}

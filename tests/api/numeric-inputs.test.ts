import { sql } from "drizzle-orm";
import fc from "fast-check";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { newId } from "../../lib/ids";
import { runDueJobs, sweep } from "../../lib/jobs/runner";
import { createLlm } from "../../lib/llm/client";
import { FLOAT4_MIN_NORMAL, flushTiny } from "../../lib/numbers";
import { DEFAULT_SETTINGS, resolveProjectSettings, resolveThreadSettings } from "../../lib/settings/settings";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { tableCounts } from "../helpers/db-state";
import { echoSummary, type ManualClock } from "../helpers/episodic-fixtures";
import { fakeEmbedding, near, startFakeOpenAI } from "../helpers/fake-openai";
import { documentedRoutes, type Parameter, type Schema } from "../helpers/openapi";
import { adminSession, createTestService, newTenant } from "../helpers/service";

/**
 * Every numeric input of every documented route (request bodies, query strings, project and thread
 * settings; found in GET /openapi.json, so a new one is covered as soon as it exists) under float
 * extremes: 5e-324, 1e-50, 1e-38, ±0, 1e308, 1e309 as text, integers beyond 2^31 and 2^53, "NaN"
 * and "Infinity" in query strings. The answer is a 400 in the spec's shape naming the field,
 * exactly when the value is outside the field's declared type and bounds, and then nothing is
 * written; otherwise the value is taken, normalised as documented (a magnitude below ~1.18e-38 is
 * 0, lib/numbers.ts). Never a 5xx, and a setting, once stored, never makes a later request fail:
 * not when written through the API, and not when an old bad value sits in the table.
 */
const DIMS = TEST_EMBEDDING_DIMENSIONS;
const fake = await startFakeOpenAI();
fake.onText(() => "A short reply.");
fake.onStructured("episode_summary", echoSummary);
fake.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
const svc = await createTestService({ provider: fake, manualTime: true });
const clock = svc.clock as ManualClock;
clock.set(new Date("2026-06-01T12:00:00.000Z"));
// A keep-alive socket the fake server has just closed can fail a valid model call: retry as the
// production client does (the answer under test is never a model failure).
svc.deps.llm = createLlm(svc.deps.config, { maxRetries: 2, timeoutMs: 10_000 });
afterAll(async () => {
  await svc.close();
  await fake.close();
});
beforeEach(() => {
  fake.requests.length = 0;
});

/** Generated requests per route; `NUMERIC_RUNS=500` for a deep run. Fixed examples come on top. */
const NUM_RUNS = Number(process.env.NUMERIC_RUNS ?? 25);

// --- Fixtures: a project with a thread, messages, completed episodes and facts ------------------

const DATASET = "numbers-ds";
const session = await adminSession(svc);
const tenant = await newTenant(svc, "numbers");

async function call(path: string, init: { method?: string; token?: string; body?: string } = {}) {
  const token = init.token ?? (path.startsWith("/dashboard/") ? session : tenant.key);
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const res = await svc.app.request(path, { method: init.method ?? "GET", headers, body: init.body });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) };
}
const post = (path: string, json: unknown, method = "POST") => call(path, { method, body: JSON.stringify(json) });

async function newThread(projectKey = tenant.key, dataset = DATASET) {
  const res = await call("/v1/threads", { method: "POST", token: projectKey, body: JSON.stringify({ dataset }) });
  expect(res.status, res.text).toBe(201);
  return res.json().threadId as string;
}
const threadId = await newThread();
for (const content of ["I live in Lisbon.", "I work at Acme.", "Noted."]) {
  const res = await post(`/v1/memory/working/threads/${threadId}/messages`, { role: "user", content });
  expect(res.status, res.text).toBe(201);
}

/** Completed episodes and facts (with embeddings) written straight into the tables. */
async function seedMemory(projectId: string, dataset: string) {
  const now = clock.now();
  const query = fakeEmbedding("Lisbon", DIMS);
  for (const [i, similarity] of [0.99, 0.5, 1e-3].entries()) {
    const at = new Date(now.getTime() - (i + 1) * 86_400_000 * 3).toISOString();
    await svc.deps.db.execute(sql`
      INSERT INTO episodes (id, project_id, thread_id, dataset, status, semantic_status, summary, key_learnings,
                            message_count, from_seq, to_seq, started_at, ended_at, embedding, created_at, updated_at)
      VALUES (${newId("epi")}, ${projectId}, 'thr_seeded', ${dataset}, 'completed', 'completed', ${`Lisbon ${i}`},
              '[]'::jsonb, 2, 1, 2, ${at}::timestamptz, ${at}::timestamptz,
              ${`[${near(query, similarity, `e${i}`)}]`}::vector, ${at}::timestamptz, ${at}::timestamptz)`);
  }
  for (const [i, confidence] of [0, 1e-40, 0.3, 0.9, 1].entries()) {
    await svc.deps.db.execute(sql`
      INSERT INTO facts (id, project_id, dataset, subject, predicate, object, confidence, source_quote,
                         valid_at, embedding, created_at)
      VALUES (${newId("fct")}, ${projectId}, ${dataset}, 'user', 'visited', ${`Lisbon ${i}`}, ${confidence}::real,
              'I went to Lisbon', ${now.toISOString()}::timestamptz, ${`[${near(query, 0.9 - i / 10, `f${i}`)}]`}::vector,
              ${now.toISOString()}::timestamptz)`);
  }
}
await seedMemory(tenant.projectId, DATASET);

/**
 * Requests that read a project's settings inside their statements or in JavaScript: recall (with
 * and without a query: min_conf, lim, anchors, episode weights), a new message (idle timer,
 * autoCompactThreshold), prepare, chat. Each must succeed whatever the settings are.
 */
async function expectSettingsReadersWork(where: string, key = tenant.key, thread = threadId, dataset = DATASET) {
  const as = (path: string, body: unknown) => call(path, { method: "POST", token: key, body: JSON.stringify(body) });
  const checks: [string, Promise<{ status: number; text: string }>, number][] = [
    ["recall", as("/v1/memory/recall", { dataset, query: "Lisbon", include: ["episodes", "raw"] }), 200],
    ["recall without query", as("/v1/memory/recall", { dataset, include: ["episodes", "raw"] }), 200],
    ["recall asOf", as("/v1/memory/recall", { dataset, query: "Lisbon", asOf: "2026-06-01" }), 200],
  ];
  for (const [name, pending, status] of checks) {
    const res = await pending;
    expect({ where, name, status: res.status }, res.text.slice(0, 300)).toEqual({ where, name, status });
  }
  const sequential: [string, () => Promise<{ status: number; text: string }>, number][] = [
    ["add message", () => as(`/v1/memory/working/threads/${thread}/messages`, { role: "user", content: "hi" }), 201],
    ["prepare", () => as(`/v1/memory/working/threads/${thread}/prepare`, {}), 200],
    ["chat", () => as(`/v1/memory/working/threads/${thread}/chat`, { content: "Where do I live?" }), 200],
  ];
  for (const [name, send, status] of sequential) {
    const res = await send();
    expect({ where, name, status: res.status }, res.text.slice(0, 300)).toEqual({ where, name, status });
  }
}

// --- The numeric inputs, from the OpenAPI document ------------------------------------------------

const { doc, routes: documented } = await documentedRoutes(svc);

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  return resolve(doc.components?.schemas?.[schema.$ref.split("/").pop() ?? ""] ?? {});
}

/** The alternatives a schema accepts (anyOf/oneOf flattened). */
function alternatives(input: Schema): Schema[] {
  const schema = resolve(input);
  const alts = schema.anyOf ?? schema.oneOf;
  return alts ? alts.flatMap(alternatives) : [schema];
}
const typesOf = (s: Schema) => (Array.isArray(s.type) ? s.type : s.type ? [s.type] : []);

interface NumericRule {
  integer: boolean;
  nullable: boolean;
  minimum?: number;
  maximum?: number;
}
/** The numeric rule a schema declares, or null when it is not a number. */
function numericRule(input: Schema): NumericRule | null {
  const alts = alternatives(input);
  const numeric = alts.find((s) => typesOf(s).some((t) => t === "number" || t === "integer"));
  if (!numeric) return null;
  return {
    integer: typesOf(numeric).includes("integer"),
    nullable: alts.some((s) => typesOf(s).includes("null")),
    minimum: numeric.minimum,
    maximum: numeric.maximum,
  };
}

type Path = (string | number)[];
interface NumericField {
  path: Path;
  rule: NumericRule;
}
/** Every numeric field of a body schema, nested objects included. */
function numericFields(input: Schema, path: Path = []): NumericField[] {
  const rule = path.length > 0 ? numericRule(input) : null;
  if (rule) return [{ path, rule }];
  return alternatives(input).flatMap((s) =>
    Object.entries(s.properties ?? {}).flatMap(([k, v]) => numericFields(v, [...path, k])),
  );
}

/** A minimal valid body: required properties only. */
function requiredSample(input: Schema, name = ""): unknown {
  const schema = alternatives(input).find((s) => !typesOf(s).includes("null")) ?? resolve(input);
  if (schema.enum) return schema.enum[0];
  const type = typesOf(schema)[0];
  if (type === "object") {
    const required = new Set(schema.required ?? []);
    return Object.fromEntries(
      Object.entries(schema.properties ?? {})
        .filter(([k]) => required.has(k))
        .map(([k, v]) => [k, requiredSample(v, k)]),
    );
  }
  if (type === "array") return [];
  if (type === "boolean") return true;
  if (type === "number" || type === "integer") return Math.max(schema.minimum ?? 1, 1);
  if (name === "dataset") return DATASET;
  return "Lisbon";
}

function setAt(value: unknown, path: Path, replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  const container = { ...(value && typeof value === "object" ? value : {}) } as Record<string | number, unknown>;
  container[head] = setAt(container[head], rest, replacement);
  return container;
}

interface Route {
  method: string;
  path: string;
  label: string;
  pathParams: Parameter[];
  queryParams: Parameter[];
  body?: Schema;
  bodyFields: NumericField[];
  queryFields: (Parameter & { rule: NumericRule })[];
}

const routes: Route[] = documented
  .filter((r) => /^\/(v1|dashboard)\//.test(r.path))
  .map(({ method, path, label, op }) => {
    const body = op.requestBody?.content["application/json"]?.schema;
    const queryParams = (op.parameters ?? []).filter((p) => p.in === "query");
    return {
      method,
      path,
      label,
      pathParams: (op.parameters ?? []).filter((p) => p.in === "path"),
      queryParams,
      body,
      bodyFields: body ? numericFields(body) : [],
      queryFields: queryParams.flatMap((p) => {
        const rule = numericRule(p.schema);
        return rule ? [{ ...p, rule }] : [];
      }),
    };
  })
  .filter((r) => r.bodyFields.length > 0 || r.queryFields.length > 0);

function pathValue(route: Route, name: string): string {
  if (name === "threadId" || (name === "id" && /^\/(v1|dashboard\/browse)\/threads\//.test(route.path))) {
    return threadId;
  }
  if (name === "dataset") return DATASET;
  if (name === "id" && route.path.startsWith("/dashboard/projects/")) return tenant.projectId;
  return `missing-${name}`;
}

function urlOf(route: Route, query: Record<string, string>): string {
  let path = route.path;
  for (const p of route.pathParams) path = path.replace(`{${p.name}}`, encodeURIComponent(pathValue(route, p.name)));
  const required = Object.fromEntries(
    route.queryParams
      .filter((p) => p.required)
      .map((p) => [p.name, p.name === "projectId" ? tenant.projectId : p.name === "dataset" ? DATASET : "Lisbon"]),
  );
  const qs = new URLSearchParams({ ...required, ...query }).toString();
  return qs ? `${path}?${qs}` : path;
}

// --- Values ------------------------------------------------------------------------------------

/** JSON number texts at the edges (1e309 and 1e-400 are texts JSON.stringify never writes). */
const RAW_EXTREMES = [
  "0",
  "-0",
  "5e-324",
  "-5e-324",
  "1e-320",
  "1e-50",
  "1e-45",
  "1e-40",
  "1e-38",
  String(FLOAT4_MIN_NORMAL),
  "0.5",
  "1",
  "1.5",
  "10.000001",
  "1000.5",
  "2147483647",
  "2147483648",
  "-2147483649",
  "4294967296",
  "9007199254740993",
  "3153600000000",
  "3153600000001",
  "1e21",
  "3.5e38",
  "1e308",
  "1e309",
  "-1e309",
  "1e-400",
  "null",
];
const finiteText = (x: number) => (Number.isFinite(x) ? JSON.stringify(x) : x > 0 ? "1e309" : "-1e309");
const rawNumber = fc.oneof(
  { arbitrary: fc.constantFrom(...RAW_EXTREMES), weight: 3 },
  { arbitrary: fc.double().map(finiteText), weight: 2 },
  { arbitrary: fc.integer({ min: -(2 ** 40), max: 2 ** 40 }).map(String), weight: 1 },
  { arbitrary: fc.double({ min: 0, max: 1, noNaN: true }).map(finiteText), weight: 1 },
);

/** Query-string texts: the spec coerces digits only, so everything else is the wrong type. */
const QUERY_EXTREMES = [
  "NaN",
  "Infinity",
  "-Infinity",
  "1e309",
  "-1e309",
  "5e-324",
  "1e-50",
  "1e308",
  "1e2",
  "1.5",
  "0x10",
  "",
  " 7",
  "0",
  "-0",
  "1",
  "007",
  "2147483647",
  "2147483648",
  "-2147483649",
  "9007199254740993",
  "9".repeat(400),
];
const queryText = fc.oneof(
  { arbitrary: fc.constantFrom(...QUERY_EXTREMES), weight: 3 },
  { arbitrary: fc.integer({ min: -(2 ** 33), max: 2 ** 33 }).map(String), weight: 2 },
  { arbitrary: fc.double().map(String), weight: 1 },
  { arbitrary: fc.bigInt().map(String), weight: 1 },
);

/** Whether a field with this rule must take a value. */
function acceptable(rule: NumericRule, value: unknown): boolean {
  if (value === null) return rule.nullable;
  if (typeof value !== "number" || !Number.isFinite(value)) return false;
  if (rule.integer && !Number.isInteger(value)) return false;
  return (rule.minimum === undefined || value >= rule.minimum) && (rule.maximum === undefined || value <= rule.maximum);
}

/** Query strings: digits only (after trimming), then the bounds. */
function queryValue(text: string): number | string {
  return /^-?\d+$/.test(text.trim()) ? Number(text) : text;
}

/** What the field holds once taken: -0 is 0, and a non-integer below ~1.18e-38 is 0 (lib/numbers.ts). */
const normalised = (rule: NumericRule, value: number | null) =>
  value === null ? null : rule.integer ? value + 0 : flushTiny(value);

// --- Sending and checking ------------------------------------------------------------------------

const BAND = ["contradictionBandMin", "factDedupThreshold"];

/** The body for one field's value: required properties, the field, and its band partner. */
function bodyWith(route: Route, field: NumericField, raw: string): string {
  const PLACEHOLDER = "__numeric__";
  let base = route.body ? requiredSample(route.body) : {};
  const key = field.path.at(-1) as string;
  const partner = BAND.find((k) => k !== key);
  if (BAND.includes(key) && partner && acceptable(field.rule, JSON.parse(raw))) {
    // Both ends of the contradiction band move together (the cross-field rule is not under test).
    base = setAt(base, [...field.path.slice(0, -1), partner], PLACEHOLDER);
  }
  base = setAt(base, field.path, PLACEHOLDER);
  return JSON.stringify(base).replaceAll(`"${PLACEHOLDER}"`, raw);
}

type Answer = Awaited<ReturnType<typeof call>>;

/** No 5xx; a 4xx in the spec's shape that names `path` and wrote nothing; a 2xx when `valid`. */
async function expectAnswer(where: string, path: Path, valid: boolean, send: () => Promise<Answer>) {
  await svc.settle();
  const before = await tableCounts(svc.deps.db);
  const res = await send();
  expect(res.status, `${where}: never a 5xx (${res.text.slice(0, 300)})`).toBeLessThan(500);
  if (valid) {
    // Taken: whatever the route answers for valid input (404 for ids that exist nowhere).
    expect(res.status, `${where}: a valid value is taken (${res.text.slice(0, 300)})`).not.toBe(400);
    return res;
  }
  expect(res.status, `${where}: rejected (${res.text.slice(0, 300)})`).toBe(400);
  const body = JSON.parse(res.text) as { error: string; issues: { code: string; path: Path; message: string }[] };
  expect(Object.keys(body).sort(), where).toEqual(["error", "issues"]);
  expect(body.error, where).toBe("Validation error");
  for (const issue of body.issues) {
    expect([typeof issue.code, typeof issue.message, Array.isArray(issue.path)], where).toEqual([
      "string",
      "string",
      true,
    ]);
  }
  expect(
    body.issues.map((i) => JSON.stringify(i.path)),
    `${where}: the issue names ${path.join(".")}`,
  ).toContain(JSON.stringify(path));
  expect(await tableCounts(svc.deps.db), `${where}: a 400 writes nothing`).toEqual(before);
  return res;
}

/** Checks after a taken value: what was stored is the value as normalised, and readers still work. */
async function afterTaken(route: Route, field: NumericField, value: number | null, res: Answer) {
  const where = `${route.label} ${field.path.join(".")}=${value}`;
  const expected = normalised(field.rule, value);
  const key = field.path.at(-1) as string;
  if (route.label === "PATCH /dashboard/projects/{id}/settings") {
    const [group] = field.path as string[];
    expect(res.json().settings[group][key], where).toBe(expected);
    await expectSettingsReadersWork(where);
  } else if (route.label === "POST /v1/threads" || route.label === "PATCH /v1/threads/{id}") {
    const thread = res.json() as { threadId: string; settings: { episodic?: Record<string, unknown> } };
    // Null is "no override" in a thread: stripped, so the previous value or the project's applies.
    if (expected !== null) expect(thread.settings.episodic?.[key], where).toBe(expected);
    await expectSettingsReadersWork(where, tenant.key, thread.threadId);
  } else if (route.label === "POST /v1/memory/working/threads/{threadId}/messages") {
    const listed = await call(`/v1/memory/working/threads/${threadId}/messages?limit=1&order=desc`);
    const [message] = listed.json().messages as { latencyMs: number | null; tokens: Record<string, number> | null }[];
    if (key === "latencyMs") {
      // A real column: compare as float4.
      expect(Math.fround(message.latencyMs as number), where).toBe(Math.fround(expected as number));
    } else {
      expect(message.tokens?.[key], where).toBe(expected);
    }
  }
}

// --- The suite -----------------------------------------------------------------------------------

describe("the numeric inputs", () => {
  it("are read from the OpenAPI document: bodies, query strings, project and thread settings", () => {
    const labels = (r: Route) => [
      ...r.bodyFields.map((f) => `${r.label} ${f.path.join(".")}`),
      ...r.queryFields.map((q) => `${r.label} ?${q.name}`),
    ];
    const all = routes.flatMap(labels);
    expect(all).toEqual(
      expect.arrayContaining([
        "POST /v1/memory/recall minConfidence",
        "POST /v1/memory/recall limit",
        "POST /v1/memory/working/threads/{threadId}/messages latencyMs",
        "POST /v1/memory/working/threads/{threadId}/messages tokens.input",
        "POST /v1/memory/working/threads/{threadId}/prepare messageLimit",
        "POST /v1/memory/working/threads/{threadId}/prepare ?messageLimit",
        "POST /v1/memory/working/threads/{threadId}/chat messageLimit",
        "GET /v1/memory/working/threads/{threadId}/messages ?before",
        "POST /v1/threads settings.episodic.autoEpisodeIntervalMs",
        "PATCH /v1/threads/{id} settings.episodic.similarityWeight",
        "POST /dashboard/projects/{id}/recall minConfidence",
        "GET /dashboard/projects/{id}/activity ?days",
        "GET /dashboard/browse/facts ?offset",
      ]),
    );
    // Every numeric setting of the PATCH body (all but the booleans).
    const settings = routes.find((r) => r.label === "PATCH /dashboard/projects/{id}/settings");
    const numericSettings = Object.entries(DEFAULT_SETTINGS).flatMap(([group, values]) =>
      Object.entries(values)
        .filter(([, v]) => typeof v !== "boolean")
        .map(([key]) => `${group}.${key}`),
    );
    expect(settings?.bodyFields.map((f) => f.path.join(".")).sort()).toEqual(numericSettings.sort());
    // Every numeric input declares both bounds (what its column and SQL can hold).
    for (const r of routes) {
      for (const f of [...r.bodyFields.map((b) => ({ name: b.path.join("."), rule: b.rule })), ...r.queryFields]) {
        const where = `${r.label} ${"name" in f ? f.name : ""}`;
        expect([f.rule.minimum, f.rule.maximum].map(Number.isFinite), where).toEqual([true, true]);
      }
    }
  });
});

const bodyRoutes = routes.filter((r) => r.bodyFields.length > 0);
describe.each(bodyRoutes)("$label: numeric body fields", (route) => {
  it("a value outside the declared type and bounds is a 400 naming the field; any other is taken as documented", async () => {
    const send = async (field: NumericField, raw: string) => {
      const value = JSON.parse(raw) as number | null;
      const valid = acceptable(field.rule, value);
      const where = `${route.label} ${field.path.join(".")}=${raw}`;
      const res = await expectAnswer(where, field.path, valid, () =>
        call(urlOf(route, {}), { method: route.method, body: bodyWith(route, field, raw) }),
      );
      if (valid && res.status < 300) await afterTaken(route, field, value, res);
    };
    const examples = route.bodyFields.flatMap((field) =>
      ["5e-324", "1e-50", "1e-38", "-0", "1e308", "1e309", "2147483648", "null"].map((raw): [NumericField, string] => [
        field,
        raw,
      ]),
    );
    await fc.assert(fc.asyncProperty(fc.constantFrom(...route.bodyFields), rawNumber, send), {
      numRuns: NUM_RUNS,
      examples,
    });
  }, 120_000);
});

const queryRoutes = routes.filter((r) => r.queryFields.length > 0);
describe.each(queryRoutes)("$label: numeric query parameters", (route) => {
  it('"NaN", "Infinity", "1e309", fractions and values beyond the bounds are a 400 naming the parameter', async () => {
    const send = async (param: Route["queryFields"][number], text: string) => {
      const valid = acceptable(param.rule, queryValue(text));
      // A POST with a query parameter (prepare) carries no body.
      await expectAnswer(`${route.label} ?${param.name}=${text.slice(0, 40)}`, [param.name], valid, () =>
        call(urlOf(route, { [param.name]: text }), { method: route.method }),
      );
    };
    const examples = route.queryFields.flatMap((param) =>
      ["NaN", "Infinity", "-Infinity", "1e309", "5e-324", "1.5", "-0", "2147483648", "9007199254740993"].map(
        (text): [Route["queryFields"][number], string] => [param, text],
      ),
    );
    await fc.assert(fc.asyncProperty(fc.constantFrom(...route.queryFields), queryText, send), {
      numRuns: NUM_RUNS,
      examples,
    });
  }, 60_000);
});

// --- Settings: a stored value never makes a later request fail -----------------------------------

const SETTINGS = "/dashboard/projects";

describe("retrievalMinConfidence 1e-50", () => {
  it("PATCH stores it as 0 and recall answers with the facts of any confidence", async () => {
    const t = await newTenant(svc, "patch-tiny");
    await seedMemory(t.projectId, "ds");
    const res = await post(
      `${SETTINGS}/${t.projectId}/settings`,
      { semantic: { retrievalMinConfidence: 1e-50 } },
      "PATCH",
    );
    expect(res.status, res.text).toBe(200);
    expect(res.json().settings.semantic.retrievalMinConfidence).toBe(0);
    const recall = await call("/v1/memory/recall", {
      method: "POST",
      token: t.key,
      body: JSON.stringify({ dataset: "ds", include: ["raw"] }),
    });
    expect(recall.status, recall.text).toBe(200);
    expect(recall.json().factCount).toBe(5);
    await expectSettingsReadersWork("patched 1e-50", t.key, await newThread(t.key, "ds"), "ds");
  });

  it("as a per-call minConfidence counts as 0 (so does 5e-324); 1e309 is a 400 naming it", async () => {
    const t = await newTenant(svc, "per-call-tiny");
    await seedMemory(t.projectId, "ds");
    const recall = (raw: string) =>
      call("/v1/memory/recall", {
        method: "POST",
        token: t.key,
        body: `{"dataset":"ds","include":["raw"],"minConfidence":${raw}}`,
      });
    for (const raw of ["1e-50", "5e-324", "0"]) {
      const res = await recall(raw);
      expect(res.status, res.text).toBe(200);
      expect(res.json().factCount, raw).toBe(5);
    }
    const res = await recall("1e309");
    expect(res.status).toBe(400);
    expect(res.json().issues.map((i: { path: Path }) => i.path)).toContainEqual(["minConfidence"]);
  });

  it("an old value stored straight into the settings table (no validation) does not make recall fail", async () => {
    const t = await newTenant(svc, "stored-tiny");
    await seedMemory(t.projectId, "ds");
    await svc.deps.db.execute(
      sql`UPDATE projects SET settings = '{"semantic":{"retrievalMinConfidence":1e-50}}'::jsonb WHERE id = ${t.projectId}`,
    );
    const recall = await call("/v1/memory/recall", {
      method: "POST",
      token: t.key,
      body: JSON.stringify({ dataset: "ds", query: "Lisbon", include: ["raw", "episodes"] }),
    });
    expect(recall.status, recall.text).toBe(200);
    expect(recall.json().factCount).toBe(5);
    const settings = await call(`${SETTINGS}/${t.projectId}/settings`);
    expect(settings.json().settings.semantic.retrievalMinConfidence).toBe(0);
  });

  it("a stored number JavaScript cannot read back exactly (written by hand) does not block later changes", async () => {
    const t = await newTenant(svc, "stored-precise");
    for (const stored of ["0.12345678901234567890123", "1e400"]) {
      await svc.deps.db.execute(
        sql`UPDATE projects SET settings = ${`{"semantic":{"retrievalMinConfidence":${stored}}}`}::jsonb WHERE id = ${t.projectId}`,
      );
      const patched = await call(`${SETTINGS}/${t.projectId}/settings`, {
        method: "PATCH",
        body: JSON.stringify({ episodic: { maxRetries: 5 } }),
      });
      expect(patched.status, patched.text).toBe(200);
      const reset = await call(`${SETTINGS}/${t.projectId}/settings/semantic/retrievalMinConfidence`, {
        method: "DELETE",
      });
      expect(reset.status, reset.text).toBe(200);
      const field = (reset.json().fields as { key: string; value: unknown; overridden: boolean }[]).find(
        (f) => f.key === "retrievalMinConfidence",
      );
      expect(field).toMatchObject({ value: DEFAULT_SETTINGS.semantic.retrievalMinConfidence, overridden: false });
    }
  });
});

/** Values no setting accepts as they are, or that it normalises. */
const BAD_STORED = [1e-50, 5e-324, -5e-324, 1e-40, 1e300, -1, 2.5, 1e10, 3_153_600_000_001, "0.5", null, true, [], {}];
const numericSettingKeys = Object.entries(DEFAULT_SETTINGS).flatMap(([group, values]) =>
  Object.entries(values)
    .filter(([, v]) => typeof v !== "boolean")
    .map(([key]) => [group, key] as [string, string]),
);
const storedBadSettings = fc
  .array(fc.tuple(fc.constantFrom(...numericSettingKeys), fc.constantFrom(...BAD_STORED)), {
    minLength: 1,
    maxLength: 6,
  })
  .map((entries) => {
    const stored: Record<string, Record<string, unknown>> = {};
    for (const [[group, key], value] of entries) {
      stored[group] ??= {};
      stored[group][key] = value;
    }
    return stored;
  });

describe("old bad values in the settings tables", () => {
  it("each numeric setting, stored straight into the table with a bad value: every reader still answers", async () => {
    const t = await newTenant(svc, "stored-each");
    await seedMemory(t.projectId, "ds");
    const thread = await newThread(t.key, "ds");
    for (const [group, key] of numericSettingKeys) {
      for (const value of [1e-50, 5e-324, 1e300, 2.5, "x"]) {
        const stored = { [group]: { [key]: value } };
        await svc.deps.db.execute(
          sql`UPDATE projects SET settings = ${JSON.stringify(stored)}::jsonb WHERE id = ${t.projectId}`,
        );
        await expectSettingsReadersWork(`${group}.${key}=${value}`, t.key, thread, "ds");
        const settings = await call(`${SETTINGS}/${t.projectId}/settings`);
        expect(settings.json().settings, `${group}.${key}=${value}`).toEqual(resolveProjectSettings(stored));
        const fields = await call(`${SETTINGS}/${t.projectId}/settings/fields`);
        expect(fields.status, fields.text).toBe(200);
      }
    }
  }, 120_000);

  it("any mix of bad stored project and thread values: requests, the idle timer, summaries and the sweep still work", async () => {
    const t = await newTenant(svc, "stored-mix");
    await seedMemory(t.projectId, "ds");
    await fc.assert(
      fc.asyncProperty(storedBadSettings, storedBadSettings, async (project, threadOverride) => {
        const where = `project ${JSON.stringify(project)} thread ${JSON.stringify(threadOverride.episodic ?? {})}`;
        await svc.deps.db.execute(
          sql`UPDATE projects SET settings = ${JSON.stringify(project)}::jsonb WHERE id = ${t.projectId}`,
        );
        const thread = await newThread(t.key, "ds");
        await svc.deps.db.execute(
          sql`UPDATE threads SET settings = ${JSON.stringify({ episodic: threadOverride.episodic ?? {} })}::jsonb
              WHERE id = ${thread}`,
        );
        await expectSettingsReadersWork(where, t.key, thread, "ds");
        // The idle timer (the default interval, 30 minutes, when the stored one is bad), the
        // summary and fact extraction it leads to, and the sweep's backstop and retries.
        clock.advance(31 * 60_000);
        await runDueJobs(svc.deps);
        await svc.settle();
        await sweep(svc.deps);
        const failedJobs = rowsOf<{ key: string; last_error: string }>(
          await svc.deps.db.execute(
            sql`SELECT key, last_error FROM jobs WHERE project_id = ${t.projectId} AND last_error IS NOT NULL`,
          ),
        );
        expect(failedJobs, where).toEqual([]);
        // The timer fired when the effective interval (by the same rules as every reader) had passed.
        const interval = resolveThreadSettings(resolveProjectSettings(project), threadOverride).episodic
          .autoEpisodeIntervalMs;
        const episodes = rowsOf<{ status: string }>(
          await svc.deps.db.execute(sql`SELECT status FROM episodes WHERE thread_id = ${thread}`),
        );
        const fired = interval !== null && interval <= 31 * 60_000;
        expect(
          episodes.map((e) => e.status),
          where,
        ).toEqual(fired ? ["completed"] : []);
      }),
      { numRuns: 20 },
    );
  }, 120_000);
});

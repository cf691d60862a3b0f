import { sql } from "drizzle-orm";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { tableCounts } from "../helpers/db-state";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { documentedRoutes, type Schema } from "../helpers/openapi";
import { createTestService, newTenant } from "../helpers/service";

/**
 * Property: N retries (sequential, same Idempotency-Key) of any /v1 write leave the database as
 * one call does (row counts of every table, idempotency keys included) and get the first answer
 * back, byte for byte, marked `Idempotent-Replayed: true`; a request refused for its input keeps
 * no key, so its retries run again and get the same refusal, unmarked. The routes are every POST, PATCH and
 * DELETE under /v1 of GET /openapi.json, so a new write is covered as soon as it is documented.
 */
const fake = await startFakeOpenAI();
fake.onText(() => "A short reply.");
const svc = await createTestService({ provider: fake });
afterAll(async () => {
  await svc.close();
  await fake.close();
});

/** Per route. */
const NUM_RUNS = Number(process.env.IDEMPOTENCY_RUNS ?? 12);

const { doc, routes } = await documentedRoutes(svc);
const writes = routes.filter((r) => r.path.startsWith("/v1/") && ["POST", "PATCH", "DELETE"].includes(r.method));

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  return resolve(doc.components?.schemas?.[schema.$ref.split("/").pop() ?? ""] ?? {});
}

/** A valid value with every property filled in (the first enum value, the lowest numbers). */
function sample(input: Schema, dataset: string, name = ""): unknown {
  const schema = resolve(input);
  if (schema.enum) return schema.enum[0];
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    return sample(alternatives.find((s) => resolve(s).type !== "null") ?? alternatives[0], dataset, name);
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "object":
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, sample(v, dataset, k)]));
    case "array":
      return [sample(schema.items ?? {}, dataset, name)];
    case "integer":
    case "number": {
      const low = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
      return Math.min(Math.max(low, 1), schema.maximum ?? Number.MAX_SAFE_INTEGER);
    }
    case "boolean":
      return name !== "recall";
    case "string":
      if (schema.format === "date-time" || name === "asOf") return new Date().toISOString();
      if (schema.format === "date") return new Date().toISOString().slice(0, 10);
      if (name === "dataset") return dataset;
      return "x".repeat(Math.max(schema.minLength ?? 1, 1));
    default:
      return {};
  }
}

/** A fresh tenant with a thread of a few messages: each run starts from its own resources. */
async function fixture(n: number) {
  const tenant = await newTenant(svc, `prop-${n}`);
  const dataset = `prop-dataset-${n}`;
  const created = await svc.request("/v1/threads", { method: "POST", token: tenant.key, json: { dataset } });
  const { threadId } = (await created.json()) as { threadId: string };
  for (const content of ["I live in Lisbon.", "Noted."]) {
    await svc.request(`/v1/memory/working/threads/${threadId}/messages`, {
      method: "POST",
      token: tenant.key,
      json: { role: content === "Noted." ? "assistant" : "user", content },
    });
  }
  return { ...tenant, dataset, threadId };
}

const keyCount = async () =>
  Number(rowsOf<{ n: number }>(await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM idempotency_keys`))[0].n);
const state = async () => ({ ...(await tableCounts(svc.deps.db)), idempotency_keys: await keyCount() });

let runs = 0;

/** The refusals of a request's input: they spend no key (functions/idempotency.ts). */
const REFUSED_INPUT = new Set(["Validation error", "Malformed JSON in request body", "Unsupported Media Type"]);

describe("N retries of a /v1 write with one Idempotency-Key are one write", () => {
  it("covers every documented /v1 write", () => {
    expect(writes.length).toBeGreaterThanOrEqual(10);
  });

  it.each(writes.map((route) => [route.label, route] as const))("%s", async (_label, route) => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom("sample", "empty", "none"),
        fc.string({
          unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-_:. "),
          minLength: 1,
          maxLength: 60,
        }),
        async (retries, bodyKind, key) => {
          const f = await fixture(runs++);
          let path = route.path;
          for (const p of route.op.parameters ?? []) {
            if (p.in !== "path") continue;
            const value =
              p.name === "threadId" || (p.name === "id" && path.startsWith("/v1/threads/"))
                ? f.threadId
                : p.name === "dataset"
                  ? f.dataset
                  : `prop-missing-${p.name}`;
            path = path.replace(`{${p.name}}`, encodeURIComponent(value));
          }
          const schema = route.op.requestBody?.content["application/json"]?.schema;
          const json =
            bodyKind === "none" || !schema ? undefined : bodyKind === "empty" ? {} : sample(schema, f.dataset);
          const call = async () => {
            const res = await svc.request(path, {
              method: route.method,
              token: f.key,
              json,
              headers: { "Idempotency-Key": key.trim() || "k" },
            });
            return { status: res.status, text: await res.text(), replayed: res.headers.get("idempotent-replayed") };
          };

          const first = await call();
          expect(first.status, `${route.label}: ${first.text}`).toBeLessThan(500);
          expect(first.replayed).toBeNull();
          const once = await state();
          const refused = REFUSED_INPUT.has(JSON.parse(first.text || "{}").error);
          expect(once.idempotency_keys).toBeGreaterThanOrEqual(refused ? 0 : 1);
          for (let i = 0; i < retries; i++) {
            const again = await call();
            const replayed = refused ? null : "true";
            expect(again, route.label).toEqual({ status: first.status, text: first.text, replayed });
          }
          expect(await state(), route.label).toEqual(once);
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../functions/app";
import { OPENAPI_INFO } from "../../functions/docs";
import { parseConfig } from "../../lib/config";
import { documentedRoutes, type Parameter } from "../helpers/openapi";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The API reference's requests as a newcomer sends them from /docs: every /v1 operation carries a
 * realistic example for each path parameter, required query parameter and body, and that request
 * passes validation; the served document names its own origin as the server, so a copied curl has
 * a host.
 */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc?.close());

type ExampleParameter = Parameter & { example?: unknown; schema: Parameter["schema"] & { example?: unknown } };
type BodyContent = { schema: unknown; example?: unknown };

type Served = { servers?: { url: string }[] };
const exampleOf = (p: ExampleParameter) => p.example ?? p.schema.example;

describe("the /v1 operations' examples", () => {
  it("each path parameter, required query parameter and body has one, and the request it makes validates", async () => {
    const { routes } = await documentedRoutes(svc);
    const v1 = routes.filter((r) => r.path.startsWith("/v1/"));
    expect(v1.length).toBeGreaterThan(20);
    const t = await newTenant(svc, "examples");
    for (const route of v1) {
      const params = (route.op.parameters ?? []) as ExampleParameter[];
      let path = route.path;
      const query = new URLSearchParams();
      for (const p of params) {
        const example = exampleOf(p);
        if (p.in === "path" || (p.in === "query" && p.required)) {
          expect(example, `${route.label}: ${p.in} parameter ${p.name}`).toBeTypeOf("string");
          expect(example, `${route.label}: ${p.name}`).not.toBe("");
        }
        if (p.in === "path") path = path.replace(`{${p.name}}`, encodeURIComponent(String(example)));
        if (p.in === "query" && p.required) query.set(p.name, String(example));
      }
      const content = route.op.requestBody?.content["application/json"] as BodyContent | undefined;
      if (route.op.requestBody?.required) expect(content?.example, `${route.label}: body example`).toBeDefined();
      const res = await svc.request(`${path}${query.size ? `?${query}` : ""}`, {
        method: route.method,
        token: t.key,
        json: content?.example,
      });
      // Examples name no real thread, episode or fact: a 404 (or a 500 saying no provider is
      // configured) is the request passing validation; a 400 is an example that fails it.
      const body = res.status === 400 || res.status === 500 ? await res.text() : "";
      const noProvider = res.status === 500 && body.includes("No model provider is configured");
      expect([200, 201, 404].includes(res.status) || noProvider, `${route.label} answered ${res.status} ${body}`).toBe(
        true,
      );
    }
  });

  it("datasets are named like an end user and questions are real ones, not placeholders", async () => {
    const { routes } = await documentedRoutes(svc);
    const recall = routes.find((r) => r.label === "POST /v1/memory/recall");
    const body = (recall?.op.requestBody?.content["application/json"] as BodyContent | undefined)?.example;
    expect(body).toMatchObject({ dataset: "user-42", query: expect.stringMatching(/\?$/) });
    const dataset = routes
      .filter((r) => r.path.startsWith("/v1/"))
      .flatMap((r) => (r.op.parameters ?? []) as ExampleParameter[])
      .filter((p) => p.name === "dataset")
      .map(exampleOf);
    expect(new Set(dataset)).toEqual(new Set(["user-42"]));
  });
});

describe("the document's servers", () => {
  it("served: the origin it was fetched from", async () => {
    const doc = (await (await svc.app.request("http://memory.example.test:8787/openapi.json")).json()) as Served;
    expect(doc.servers).toEqual([{ url: "http://memory.example.test:8787" }]);
    const other = (await (await svc.app.request("https://memory.example.com/openapi.json")).json()) as Served;
    expect(other.servers).toEqual([{ url: "https://memory.example.com" }]);
  });

  it("generated (npm run openapi, the client's and dashboard's types): none, so the files stay stable", () => {
    const app = createApp({
      deps: () => {
        throw new Error("no dependencies");
      },
      corsOrigins: parseConfig({}).corsOrigins,
    });
    expect(app.getOpenAPI31Document(OPENAPI_INFO)).not.toHaveProperty("servers");
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestService, newTenant, type TestService } from "../helpers/service";

let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc.close());

describe("health", () => {
  it("answers ok with the database up", async () => {
    const res = await svc.request("/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", services: { postgres: "ok" } });
  });
  it("creates a thread with a new key", async () => {
    const t = await newTenant(svc);
    const res = await svc.request("/v1/threads", { method: "POST", token: t.key, json: { dataset: "d" } });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { dataset: string }).dataset).toBe("d");
  });
});

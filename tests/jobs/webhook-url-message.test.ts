import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminSession, createTestService, newTenant, type TestService } from "../helpers/service";

/** Registering a webhook to a local receiver without WEBHOOKS_ALLOW_HTTP: the 400 names the variable. */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc?.close());

describe("POST /dashboard/webhooks without WEBHOOKS_ALLOW_HTTP", () => {
  it("refuses http:// and loopback URLs with an error naming WEBHOOKS_ALLOW_HTTP", async () => {
    const t = await newTenant(svc, "hooks");
    const token = await adminSession(svc);
    const answers: Record<string, string> = {};
    for (const url of ["http://localhost:3000/hook", "http://example.com/hook", "https://127.0.0.1:3000/hook"]) {
      const res = await svc.request("/dashboard/webhooks", {
        method: "POST",
        token,
        json: { projectId: t.projectId, url, eventTypes: ["dataset.erased"] },
      });
      expect(res.status, url).toBe(400);
      const body = (await res.json()) as { error: string; issues: { path: string[]; message: string }[] };
      expect(body.error, url).toBe("Validation error");
      expect(body.issues.map((i) => i.path)).toEqual([["url"]]);
      answers[url] = body.issues[0].message;
    }
    expect(answers).toEqual({
      "http://localhost:3000/hook":
        "Only https:// URLs are accepted (http:// to localhost needs WEBHOOKS_ALLOW_HTTP=true on the server, for development)",
      "http://example.com/hook":
        "Only https:// URLs are accepted (http:// to localhost needs WEBHOOKS_ALLOW_HTTP=true on the server, for development)",
      "https://127.0.0.1:3000/hook":
        "The address 127.0.0.1 is private, loopback or reserved (localhost, 127.0.0.1 and [::1] only with WEBHOOKS_ALLOW_HTTP=true on the server, for development)",
    });
  });
});

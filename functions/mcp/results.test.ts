import { describe, expect, it } from "vitest";
import { z } from "zod";
import { NO_PROVIDER_MESSAGE, NoProviderError, notFound } from "../../lib/errors";
import { toolFailure, toolSuccess } from "./results";

describe("toolSuccess", () => {
  it("gives the result as structured content and as JSON text", () => {
    const result = toolSuccess({ result: { factId: "fct_1", invalidatedAt: "2026-01-01T00:00:00.000Z" } });
    expect(result.structuredContent).toEqual({ factId: "fct_1", invalidatedAt: "2026-01-01T00:00:00.000Z" });
    expect(result.content).toHaveLength(1);
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(result.structuredContent);
    expect(result.isError).toBeUndefined();
  });

  it("puts the tool's own text first (recall's block), then the JSON", () => {
    const result = toolSuccess({ result: { context: "# FACTS\n- a" }, text: "# FACTS\n- a" });
    expect(result.content.map((c) => (c as { text: string }).text)).toEqual([
      "# FACTS\n- a",
      JSON.stringify({ context: "# FACTS\n- a" }, null, 2),
    ]);
  });
});

describe("toolFailure", () => {
  const bodyOf = (err: unknown) => {
    const { result, unexpected } = toolFailure(err, "Failed to recall memory");
    expect(result.isError).toBe(true);
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(result.structuredContent);
    return { body: result.structuredContent, unexpected };
  };

  it("answers bad arguments with the API's validation body, naming the field", () => {
    const parsed = z.object({ dataset: z.string().min(1) }).safeParse({ dataset: "" });
    const { body, unexpected } = bodyOf(parsed.error);
    expect(body).toMatchObject({ error: "Validation error", issues: [{ code: "too_small", path: ["dataset"] }] });
    expect(unexpected).toBe(false);
  });

  it("answers a domain refusal with its message", () => {
    expect(bodyOf(notFound("Thread not found"))).toEqual({ body: { error: "Thread not found" }, unexpected: false });
  });

  it("answers a missing model provider as the /v1 routes do: the route's 500 message, the hint in detail", () => {
    expect(bodyOf(new NoProviderError())).toEqual({
      body: { error: "Failed to recall memory", detail: NO_PROVIDER_MESSAGE },
      unexpected: false,
    });
  });

  it("answers anything else with the route's 500 message, hiding the cause, and marks it for the log", () => {
    expect(bodyOf(new Error("connection refused to 10.0.0.5"))).toEqual({
      body: { error: "Failed to recall memory" },
      unexpected: true,
    });
  });
});

import { afterEach, describe, expect, it } from "vitest";
import {
  currentTraceparent,
  errorTypeOf,
  installTelemetry,
  isTraceparent,
  type JobOutcome,
  mergeTelemetry,
  observeJob,
  observeModelCall,
  type Telemetry,
  telemetry,
  withSpan,
} from "./telemetry";

const uninstall: (() => void)[] = [];
afterEach(() => {
  for (const remove of uninstall.splice(0)) remove();
});

describe("with nothing installed", () => {
  it("has no hook: work runs directly, no traceparent, a model call's end is a no-op", async () => {
    expect(telemetry()).toEqual({});
    const answer = await withSpan("x", {}, async (span) => {
      span.setAttributes({ a: 1 });
      return 42;
    });
    expect(answer).toBe(42);
    expect(currentTraceparent()).toBeUndefined();
    expect(() => observeModelCall({ operation: "chat", kind: "completion", model: "m" })({})).not.toThrow();
    expect(await observeJob("episode", async () => ({ next: "done" }))).toEqual({ next: "done" });
  });
});

describe("installed hooks", () => {
  it("reach every implementation that has them, and stop once removed", async () => {
    const outcomes: string[] = [];
    const calls: string[] = [];
    const metrics: Telemetry = {
      job: (kind) => (outcome: JobOutcome) => outcomes.push(`${kind}:${outcome}`),
      modelCall: (call) => (end) => calls.push(`metrics ${call.kind} ${end.usage?.input}`),
    };
    const tracing: Telemetry = {
      span: (_name, _options, work) => work({ setAttributes() {} }),
      traceparent: () => "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      modelCall: (call) => (end) => calls.push(`tracing ${call.kind} ${end.error ? "failed" : "ok"}`),
    };
    const removeMetrics = installTelemetry(metrics);
    uninstall.push(installTelemetry(tracing));

    await observeJob("episode", async () => ({ next: "done" }));
    await observeJob("episode", async () => ({ next: "later" }));
    await expect(observeJob("webhook", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(outcomes).toEqual(["episode:done", "episode:later", "webhook:error"]);

    observeModelCall({ operation: "chat", kind: "episode_summary", model: "m" })({ usage: { input: 10 } });
    expect(calls).toEqual(["metrics episode_summary 10", "tracing episode_summary ok"]);
    expect(currentTraceparent()).toMatch(/^00-4bf9/);

    removeMetrics();
    await observeJob("episode", async () => ({ next: "done" }));
    expect(outcomes).toHaveLength(3);
    expect(telemetry().span).toBeDefined();
  });

  it("merge: the first tracer's span and traceparent; absent hooks stay absent", () => {
    expect(mergeTelemetry([{ episodeCompleted() {} }])).toEqual({ episodeCompleted: expect.any(Function) });
    expect(Object.keys(mergeTelemetry([]))).toEqual([]);
  });
});

describe("errorTypeOf", () => {
  class APIConnectionTimeoutError extends Error {}
  class APIConnectionError extends Error {}
  it("names a failure by status, class or kind, with a fallback", () => {
    expect(errorTypeOf(Object.assign(new Error("x"), { status: 503 }))).toBe("503");
    expect(errorTypeOf(Object.assign(new Error("wrapped"), { cause: { status: 429 } }))).toBe("429");
    expect(errorTypeOf(new APIConnectionTimeoutError("slow"))).toBe("timeout");
    expect(errorTypeOf(new APIConnectionError("refused"))).toBe("connection");
    expect(errorTypeOf(Object.assign(new Error("x"), { name: "NoProviderError" }))).toBe("no_provider");
    expect(errorTypeOf(Object.assign(new Error("x"), { name: "ProviderError" }))).toBe("invalid_response");
    expect(errorTypeOf(Object.assign(new Error("x"), { name: "AbortError" }))).toBe("aborted");
    expect(errorTypeOf("a string")).toBe("_OTHER");
  });
});

describe("isTraceparent", () => {
  it("accepts W3C version 00 only, without all-zero ids", () => {
    expect(isTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toBe(true);
    expect(isTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")).toBe(false);
    expect(isTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01")).toBe(false);
    expect(isTraceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toBe(false);
    expect(isTraceparent(42)).toBe(false);
  });
});

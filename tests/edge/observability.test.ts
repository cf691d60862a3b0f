import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiKey } from "../../lib/api-keys";
import { createProject } from "../../lib/projects";
import { useEdgeWorker } from "../helpers/edge-worker";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver";

/**
 * Issue 36 on the edge: metrics and traces belong to the Node.js host. On Workers, Cloudflare's
 * own observability (Workers Logs, automatic tracing and its OTLP export, configured in
 * wrangler.toml and the dashboard) is the source: the Worker bundles neither prom-client nor the
 * OpenTelemetry SDK, serves no /metrics, and exports nothing itself even when the Node.js host's
 * variables are set. What Miniflare can check of that is checked here (docs/operations.md).
 */

const METRICS_TOKEN = "edge-metrics-token-0123456789";
let receiver: OtlpReceiver;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  edgeVars.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
});
afterAll(() => receiver.close());

const edgeVars: Record<string, string> = {
  METRICS_TOKEN,
  OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
};
const edge = useEdgeWorker("observe", edgeVars);

describe("the Worker with METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT set", () => {
  it("bundles neither prom-client nor the OpenTelemetry SDK", () => {
    for (const marker of ["collectDefaultMetrics", "BatchSpanProcessor", "OTLPTraceExporter", "NodeTracerProvider"]) {
      expect(edge.script.includes(marker), marker).toBe(false);
    }
  });

  it("serves no /metrics: the route is unknown there (404), token or not", async () => {
    const res = await edge.mf.dispatchFetch("http://localhost/metrics", {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(res.status).toBe(404);
    await res.text();
  });

  it("answers a request carrying a traceparent and exports no span itself", async () => {
    const project = await createProject(edge.deps, { name: "edge-observe" });
    const { key } = await createApiKey({ deps: edge.deps, projectId: project.id }, { name: "edge-observe-key" });
    const res = await edge.mf.dispatchFetch("http://localhost/v1/threads", {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      },
      body: JSON.stringify({ dataset: "edge" }),
    });
    expect(res.status).toBe(201);
    const { threadId } = (await res.json()) as { threadId: string };
    const health = await edge.mf.dispatchFetch("http://localhost/health");
    expect(health.status).toBe(200);
    await health.text();
    expect(threadId).toMatch(/^thr_/);
    expect(receiver.requests).toEqual([]);
  });
});

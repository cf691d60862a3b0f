import {
  context,
  type Attributes as OtelAttributes,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import type { TracingConfig } from "../../lib/config";
import { loggableMessage } from "../../lib/log";
import { type Attributes, errorTypeOf, type ModelCall, type SpanOptions, type Telemetry } from "../../lib/telemetry";

/**
 * OpenTelemetry traces for the Node.js host, exported over OTLP/HTTP (protobuf or JSON) in
 * batches. Imported only when OTEL_EXPORTER_OTLP_ENDPOINT (or its traces variant) is set
 * (functions/observe/index.ts): without it the SDK is never loaded and lib/telemetry.ts has no
 * span hook, so nothing is traced, timed or allocated.
 *
 * Registers the SDK globally (the tracer provider, an AsyncLocalStorage context manager and the
 * W3C trace-context propagator), as an application does; `shutdown` flushes and unregisters.
 */
export interface Tracing {
  telemetry: Telemetry;
  /** Exports every span ended so far (tests; shutdown does it too). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const KINDS: Record<NonNullable<SpanOptions["kind"]>, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  consumer: SpanKind.CONSUMER,
};

export async function startTracing(config: TracingConfig, version: string): Promise<Tracing> {
  // The SDK's packages, loaded now and only now.
  const [{ NodeTracerProvider }, base, { resourceFromAttributes }, { OTLPTraceExporter }] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/resources"),
    config.protocol === "http/json"
      ? import("@opentelemetry/exporter-trace-otlp-http")
      : import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  const exporter = new OTLPTraceExporter({ url: config.url, headers: config.headers });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": config.serviceName, "service.version": version }),
    sampler: samplerOf(config, base),
    spanProcessors: [new base.BatchSpanProcessor(exporter)],
  });
  provider.register();
  const tracer = provider.getTracer("memory-service", version);

  const telemetry: Telemetry = {
    span(name, options, work) {
      const parent = options.parent
        ? propagation.extract(ROOT_CONTEXT, { traceparent: options.parent })
        : context.active();
      return tracer.startActiveSpan(
        name,
        { kind: KINDS[options.kind ?? "internal"], attributes: defined(options.attributes) },
        parent,
        async (span) => {
          try {
            return await work({ setAttributes: (attributes) => annotate(span, attributes) });
          } catch (err) {
            fail(span, err);
            throw err;
          } finally {
            span.end();
          }
        },
      );
    },
    traceparent() {
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      return carrier.traceparent;
    },
    annotate(attributes) {
      const span = trace.getActiveSpan();
      if (span) annotate(span, attributes);
    },
    modelCall(call) {
      // A leaf: nothing runs inside it, so it is not made the active span.
      const span = tracer.startSpan(`${call.operation} ${call.model}`.trim(), {
        kind: SpanKind.CLIENT,
        attributes: defined(modelCallAttributes(call)),
      });
      return ({ usage, responseModel, error }) => {
        annotate(span, {
          "gen_ai.usage.input_tokens": usage?.input,
          "gen_ai.usage.output_tokens": usage?.output,
          "gen_ai.response.model": responseModel,
        });
        if (error !== undefined) fail(span, error);
        span.end();
      };
    },
  };

  return {
    telemetry,
    flush: () => provider.forceFlush(),
    async shutdown() {
      // Unregistered, so another service in the same process (a test) may register its own, even
      // when the last export failed.
      try {
        await provider.shutdown();
      } finally {
        trace.disable();
        context.disable();
        propagation.disable();
      }
    },
  };
}

/** GenAI semantic conventions for a model call (inference, embeddings), plus what it was for. */
export function modelCallAttributes(call: ModelCall): Attributes {
  return {
    "gen_ai.operation.name": call.operation,
    // The API the client speaks; `server.address` and the models say which server answered.
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": call.model || undefined,
    "gen_ai.request.stream": call.stream,
    "gen_ai.output.type":
      call.operation === "chat" ? (call.kind === "completion" || call.stream ? "text" : "json") : undefined,
    "server.address": call.serverAddress,
    "memory.model_call.kind": call.kind,
  };
}

/** Setting `error.type` marks the span failed (a 5xx answer, where nothing threw). */
function annotate(span: Span, attributes: Attributes) {
  span.setAttributes(defined(attributes));
  if (attributes["error.type"] !== undefined) span.setStatus({ code: SpanStatusCode.ERROR });
}

/** The exception as the logs keep it: a failed statement without its parameters' values. */
function fail(span: Span, err: unknown) {
  const message = err instanceof Error ? loggableMessage(err) : String(err);
  span.recordException(err instanceof Error && message === err.message ? err : { name: errorTypeOf(err), message });
  span.setAttribute("error.type", errorTypeOf(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

function defined(attributes: Attributes | undefined): OtelAttributes {
  const out: OtelAttributes = {};
  for (const [key, value] of Object.entries(attributes ?? {})) if (value !== undefined) out[key] = value;
  return out;
}

type SamplerModule = typeof import("@opentelemetry/sdk-trace-base");

/** OTEL_TRACES_SAMPLER and its ratio, as OpenTelemetry's SDKs read them. */
function samplerOf(config: TracingConfig, base: SamplerModule) {
  const ratio = new base.TraceIdRatioBasedSampler(config.samplerArg);
  switch (config.sampler) {
    case "always_on":
      return new base.AlwaysOnSampler();
    case "always_off":
      return new base.AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_off":
      return new base.ParentBasedSampler({ root: new base.AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new base.ParentBasedSampler({ root: ratio });
    default:
      return new base.ParentBasedSampler({ root: new base.AlwaysOnSampler() });
  }
}

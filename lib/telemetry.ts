/**
 * What lib/ reports for observability (model calls, jobs, episodes, statement groups, memory
 * operations), without knowing who listens. The Node.js host installs an implementation when
 * METRICS_TOKEN (Prometheus, functions/observe/metrics.ts) or OTEL_EXPORTER_OTLP_ENDPOINT
 * (OpenTelemetry traces, functions/observe/tracing.ts) is set; otherwise no hook is installed and
 * every report below is one property read and a direct call: no span, no clock read, no allocation.
 *
 * Process-wide, as OpenTelemetry's own tracer provider and prom-client's registry are: the model
 * client and the job-row builder are made without a Deps to carry it. Nothing here imports
 * prom-client or an OpenTelemetry package (the Worker bundles lib/ and has neither).
 */

export type AttributeValue = string | number | boolean;
/** Span attributes; an undefined value is left out. */
export type Attributes = Record<string, AttributeValue | undefined>;

/** The span a piece of work runs in, to add what it learnt (counts, the response's model). */
export interface SpanScope {
  setAttributes(attributes: Attributes): void;
}

export interface SpanOptions {
  /** OpenTelemetry's span kind (default internal). */
  kind?: "internal" | "server" | "client" | "consumer";
  attributes?: Attributes;
  /**
   * A W3C `traceparent` to start the span under instead of the active span: an incoming request's
   * header, or the one a job row carries from the request that scheduled it.
   */
  parent?: string;
}

/** One call to the model provider, as the client starts it. */
export interface ModelCall {
  /** GenAI semantic conventions' `gen_ai.operation.name`. */
  operation: "chat" | "embeddings" | "rerank";
  /**
   * What the call is for, a small fixed set: the Structured Outputs schema's name
   * (`episode_summary`, `fact_extraction`, `contradiction_judgement`, `rerank_judgement`…),
   * `completion`, `stream`, `embedding`, `embedding_size` or `rerank`.
   */
  kind: string;
  /** The model requested. */
  model: string;
  /** The provider's base URL host, when not OpenAI's own. */
  serverAddress?: string;
  stream?: boolean;
}

/** Tokens the provider reported for a call (absent when it reported none). */
export interface TokenUsage {
  input?: number;
  output?: number;
}

export interface ModelCallEnd {
  usage?: TokenUsage;
  /** The model that answered, when the response names it. */
  responseModel?: string;
  /** Set when the call failed (after the SDK's own retries). */
  error?: unknown;
}

/** How a job's handler ended: done, to run again later, or threw (and runs again later). */
export type JobOutcome = "done" | "later" | "error";

export interface Telemetry {
  /** Runs `work` in a span (a child of the active span, or of `options.parent`). Tracing only. */
  span?<T>(name: string, options: SpanOptions, work: (span: SpanScope) => Promise<T>): Promise<T>;
  /** The active span's W3C `traceparent`, for work scheduled now and run later. Tracing only. */
  traceparent?(): string | undefined;
  /** Adds attributes to the active span (what a verb learnt: how many records it returned). Tracing only. */
  annotate?(attributes: Attributes): void;
  /** A model call starts; the returned function is called once when it ends. */
  modelCall?(call: ModelCall): (end: ModelCallEnd) => void;
  /** A job's handler starts; the returned function is called once with how it ended. */
  job?(kind: string): (outcome: JobOutcome) => void;
  /** An episode was summarised: seconds from its end (`ended_at`) to its completion. */
  episodeCompleted?(lagSeconds: number): void;
}

let installed: Telemetry[] = [];
let current: Telemetry = {};

/** Installs `telemetry` beside any other installed; returns the function that removes it. */
export function installTelemetry(telemetry: Telemetry): () => void {
  installed = [...installed, telemetry];
  current = mergeTelemetry(installed);
  return () => {
    installed = installed.filter((t) => t !== telemetry);
    current = mergeTelemetry(installed);
  };
}

/** What is installed now (one object; its hooks are absent when nobody listens). */
export function telemetry(): Telemetry {
  return current;
}

const NO_SPAN: SpanScope = { setAttributes() {} };

/** Runs `work` in a span when tracing is on; otherwise calls it directly. */
export function withSpan<T>(name: string, options: SpanOptions, work: (span: SpanScope) => Promise<T>): Promise<T> {
  const span = current.span;
  return span ? span(name, options, work) : work(NO_SPAN);
}

/** Adds attributes to the active span when tracing is on (a no-op otherwise). */
export function annotateSpan(attributes: Attributes): void {
  current.annotate?.(attributes);
}

/** The active span's `traceparent` when tracing is on (undefined otherwise). */
export function currentTraceparent(): string | undefined {
  return current.traceparent?.();
}

const ignoreEnd = () => {};

/** Starts observing a model call; the result is called once when it ends (a no-op when nobody listens). */
export function observeModelCall(call: ModelCall): (end: ModelCallEnd) => void {
  return current.modelCall?.(call) ?? ignoreEnd;
}

/** Runs a job's handler, reporting how it ended (done, later or thrown) when anybody listens. */
export async function observeJob<R extends { next: string }>(kind: string, run: () => Promise<R>): Promise<R> {
  const end = current.job?.(kind);
  if (!end) return run();
  try {
    const result = await run();
    end(result.next === "done" ? "done" : "later");
    return result;
  } catch (err) {
    end("error");
    throw err;
  }
}

/**
 * One object over several installed implementations (metrics and tracing): a span and the
 * traceparent come from the first that traces; call hooks reach every one that has them.
 */
export function mergeTelemetry(list: readonly Telemetry[]): Telemetry {
  const merged: Telemetry = {};
  const tracer = list.find((t) => t.span);
  if (tracer?.span) merged.span = tracer.span.bind(tracer);
  const propagator = list.find((t) => t.traceparent);
  if (propagator?.traceparent) merged.traceparent = propagator.traceparent.bind(propagator);
  const annotator = list.find((t) => t.annotate);
  if (annotator?.annotate) merged.annotate = annotator.annotate.bind(annotator);
  const modelCalls = list.flatMap((t) => (t.modelCall ? [t.modelCall.bind(t)] : []));
  if (modelCalls.length > 0) {
    merged.modelCall = (call) => {
      const ends = modelCalls.map((start) => start(call));
      return (end) => {
        for (const e of ends) e(end);
      };
    };
  }
  const jobs = list.flatMap((t) => (t.job ? [t.job.bind(t)] : []));
  if (jobs.length > 0) {
    merged.job = (kind) => {
      const ends = jobs.map((start) => start(kind));
      return (outcome) => {
        for (const e of ends) e(outcome);
      };
    };
  }
  const episodes = list.flatMap((t) => (t.episodeCompleted ? [t.episodeCompleted.bind(t)] : []));
  if (episodes.length > 0) {
    merged.episodeCompleted = (lag) => {
      for (const e of episodes) e(lag);
    };
  }
  return merged;
}

/** A W3C traceparent (version 00): 32 hex trace id, 16 hex parent id, 2 hex flags, neither id all zeros. */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Whether a value is a traceparent worth carrying (a job row keeps only these). */
export function isTraceparent(value: unknown): value is string {
  return typeof value === "string" && TRACEPARENT.test(value);
}

/**
 * A failure as a low-cardinality `error.type` (OpenTelemetry's attribute; the metrics' label): the
 * provider's HTTP status, `timeout`, `connection`, `aborted`, `no_provider`, `invalid_response`
 * (a reply the client could not use), or `_OTHER`. Read from the error's name and status, so
 * lib/ needs no SDK's classes here.
 */
export function errorTypeOf(err: unknown): string {
  const chain = [err, (err as { cause?: unknown } | null)?.cause];
  for (const e of chain) {
    const status = (e as { status?: unknown } | null)?.status;
    if (typeof status === "number") return String(status);
  }
  for (const e of chain) {
    const name = nameOf(e);
    if (name === "NoProviderError") return "no_provider";
    if (/Timeout/i.test(name)) return "timeout";
    if (/Abort/i.test(name)) return "aborted";
    if (/Connection/i.test(name)) return "connection";
  }
  return nameOf(err) === "ProviderError" ? "invalid_response" : "_OTHER";
}

/** An error's own name, or its class's when it left `name` as Error (the openai SDK's classes do). */
function nameOf(e: unknown): string {
  if (typeof e !== "object" || e === null) return "";
  const name = (e as { name?: unknown }).name;
  if (typeof name === "string" && name !== "Error") return name;
  return (e as { constructor?: { name?: string } }).constructor?.name ?? "";
}

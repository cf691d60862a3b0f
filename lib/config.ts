import { z } from "zod";
import { PASSWORD_LENGTH } from "./inputs";
import type { LogLevel } from "./log";

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v.trim()));

/**
 * The longest delay a Node.js or Workers timer takes (2^31 - 1 ms, about 24.8 days): a longer one
 * fires after 1 ms, so a sweep interval above it would run the sweep continuously.
 */
const TIMER_MAX_MS = 2_147_483_647;

// Blank (spaces included) is the default, as for every variable: `PORT=" "` is not port 0.
const intFromEnv = (fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.preprocess(
    (v) => (v === undefined || (typeof v === "string" && v.trim() === "") ? fallback : Number(v)),
    z.number().int().min(min).max(max),
  );

/** The embedded database's buffer pool: Postgres's least, and what its 2 GiB of WASM memory leaves room for. */
const SHARED_BUFFERS_MIN_KB = 128;
const SHARED_BUFFERS_MAX_KB = 1400 * 1024;
/** A size as Postgres writes one: digits and a unit. */
const SIZE = /^(\d+)(kB|MB|GB)$/;
const sizeInKb = (size: string) => {
  const [, n, unit] = SIZE.exec(size) ?? [];
  return Number(n) * (unit === "GB" ? 1024 * 1024 : unit === "MB" ? 1024 : 1);
};

/** A string whose blank value (docker-compose's `${VAR}` of an unset variable) is `fallback`. */
const stringOr = (fallback: string) => optionalString.transform((v) => v ?? fallback);

/** The samplers of OTEL_TRACES_SAMPLER the Node.js host knows (OpenTelemetry's built-in ones). */
export const TRACE_SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** OTLP over HTTP, protobuf (OpenTelemetry's default) or JSON; gRPC is not carried. */
const otlpProtocol = optionalString.pipe(
  z.enum(["http/protobuf", "http/json"], { message: "http/protobuf or http/json (gRPC is not supported)" }).optional(),
);

const otlpEndpoint = z.url({ protocol: /^https?$/, message: "an http:// or https:// URL" });

/**
 * A server's base URL, checked at start: `localhost:11434/v1` (no scheme) failed every model call
 * later as "Connection error.".
 */
const httpUrl = optionalString.pipe(otlpEndpoint.optional());

/** Every environment variable the service reads, parsed once at the host's entry. */
export const configSchema = z.object({
  PORT: intFromEnv(8787, 0, 65_535),
  // A postgres:// (or postgresql://) URL: anything else would only fail at the first connection.
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .refine((v) => /^postgres(ql)?:\/\//.test(v) && URL.canParse(v), "a postgres:// URL")
      .optional(),
  ),
  NEON_FETCH_ENDPOINT: optionalString,
  // Blank is the default, as for every other variable.
  PGLITE_DIR: optionalString.transform((v) => v ?? ".data/pglite"),
  // Blank is the default, as for the other variables; any case.
  PGLITE_DURABILITY: optionalString.pipe(
    z
      .string()
      .transform((v) => v.toLowerCase())
      .pipe(z.enum(["full", "fast"]))
      .default("full"),
  ),
  // The embedded database's shared_buffers (lib/db/pglite.ts's default when unset): most of its RSS.
  PGLITE_SHARED_BUFFERS: optionalString.pipe(
    z
      .string()
      .regex(SIZE, "a size such as 32MB")
      .refine((v) => {
        const kB = sizeInKb(v);
        return kB >= SHARED_BUFFERS_MIN_KB && kB <= SHARED_BUFFERS_MAX_KB;
      }, "from 128kB (Postgres's least) to 1400MB (the embedded database's memory is 2 GiB in all)")
      .optional(),
  ),
  // Trimmed as a username typed in the dashboard or the CLI is; blank is the default.
  ADMIN_USERNAME: optionalString.pipe(z.string().max(100).default("admin")),
  ADMIN_PASSWORD: optionalString.pipe(z.string().min(PASSWORD_LENGTH.min).max(PASSWORD_LENGTH.max).optional()),
  OPENAI_API_KEY: optionalString,
  OPENAI_BASE_URL: httpUrl,
  LLM_MODEL: stringOr("gpt-4o-mini"),
  EMBEDDING_MODEL: stringOr("text-embedding-3-small"),
  // Embeddings from their own server (vLLM, llama.cpp: one model per server); each defaults to OPENAI_*.
  EMBEDDING_BASE_URL: httpUrl,
  EMBEDDING_API_KEY: optionalString,
  // pgvector indexes half-precision vectors of up to 4,000 dimensions (lib/db/vector-indexes.ts).
  EMBEDDING_DIMENSIONS: intFromEnv(1536, 1, 4000),
  // The reranker projects may turn on (setting `rerank`): a /rerank endpoint when set, else the chat model.
  RERANK_BASE_URL: httpUrl,
  RERANK_API_KEY: optionalString,
  RERANK_MODEL: optionalString,
  CORS_ORIGIN: stringOr("http://localhost:5173,http://127.0.0.1:5173"),
  RETRY_INTERVAL_MS: intFromEnv(120_000, 1000, TIMER_MAX_MS),
  // How long a stored Idempotency-Key answer is replayed (default 24 hours; a minute to a year:
  // not a timer, an expiry date the database must hold).
  IDEMPOTENCY_TTL_MS: intFromEnv(86_400_000, 60_000, 366 * 86_400_000),
  QSTASH_TOKEN: optionalString,
  QSTASH_URL: httpUrl,
  QSTASH_CURRENT_SIGNING_KEY: optionalString,
  QSTASH_NEXT_SIGNING_KEY: optionalString,
  PUBLIC_BASE_URL: httpUrl,
  // Webhooks: plain http:// to localhost/127.0.0.1/[::1] allowed (development and tests only).
  WEBHOOKS_ALLOW_HTTP: z.preprocess(
    (v) =>
      v === true ||
      String(v ?? "")
        .trim()
        .toLowerCase() === "true",
    z.boolean(),
  ),
  // How long one webhook attempt may take (default 10 s).
  WEBHOOK_TIMEOUT_MS: intFromEnv(10_000, 50, TIMER_MAX_MS),
  // How many days a finished webhook delivery and its attempts are kept (default 30; 0 keeps them;
  // at most 100 years: the cut-off date must be one Postgres and JavaScript can hold).
  WEBHOOK_RETENTION_DAYS: intFromEnv(30, 0, 36_500),
  // The Node.js host's HTTP timeouts. Node's own keep-alive default (5 s) is below the idle
  // timeout of common proxies and load balancers (60 s and more): the proxy would reuse a
  // connection the server is closing at that moment.
  KEEP_ALIVE_TIMEOUT_MS: intFromEnv(65_000, 1000, TIMER_MAX_MS),
  HEADERS_TIMEOUT_MS: z.preprocess(
    (v) => (v === undefined || v === "" ? undefined : Number(v)),
    z.number().int().min(1000).max(TIMER_MAX_MS).optional(),
  ),
  // The Node.js host: GET /metrics (Prometheus) behind this bearer token; off when unset.
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, "at least 16 characters").optional()),
  // The Node.js host: OpenTelemetry traces over OTLP/HTTP, OpenTelemetry's standard variables
  // (the traces-specific one wins over the general one). Off when neither endpoint is set.
  // An http(s) URL: "localhost:4318" parses as a URL of scheme "localhost:", and exports nothing.
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString.pipe(otlpEndpoint.optional()),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalString.pipe(otlpEndpoint.optional()),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_HEADERS: optionalString,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optionalString,
  OTEL_SERVICE_NAME: optionalString,
  OTEL_TRACES_SAMPLER: optionalString.pipe(z.enum(TRACE_SAMPLERS).optional()),
  OTEL_TRACES_SAMPLER_ARG: optionalString.pipe(
    z
      .string()
      .transform(Number)
      .pipe(z.number({ message: "a ratio from 0 to 1" }).min(0, "a ratio from 0 to 1").max(1, "a ratio from 0 to 1"))
      .optional(),
  ),
  // Case-insensitive, as OpenTelemetry's SDKs read it.
  OTEL_SDK_DISABLED: optionalString.pipe(
    z
      .string()
      .transform((v) => v.toLowerCase())
      .pipe(z.enum(["true", "false"]))
      .optional(),
  ),
  // Both hosts: the least severe level written (error, warn, info, debug); any case, blank is info.
  LOG_LEVEL: z.preprocess(
    (v) => (typeof v === "string" ? v.trim().toLowerCase() || undefined : v),
    z.enum(["error", "warn", "info", "debug"] satisfies LogLevel[]).default("info"),
  ),
});

export type Env = z.input<typeof configSchema>;

/** An OpenAI-compatible server: its base URL (OpenAI's when unset) and key (optional with a URL). */
export interface ProviderEndpoint {
  apiKey: string | undefined;
  baseUrl: string | undefined;
}

export interface Config {
  port: number;
  databaseUrl: string | undefined;
  /** SQL-over-HTTP endpoint for the Neon driver when it is not Neon's own (local dev, tests). */
  neonFetchEndpoint: string | undefined;
  pgliteDir: string;
  /** `full`: a commit is on disk before it is acknowledged; `fast`: fsync off (throwaway data). */
  pgliteDurability: "full" | "fast";
  /** The embedded database's shared_buffers (PGLITE_SHARED_BUFFERS); lib/db/pglite.ts's default when unset. */
  pgliteSharedBuffers: string | undefined;
  adminUsername: string;
  adminPassword: string | undefined;
  openai: {
    /** Optional with a base URL: a server that needs no key gets a placeholder. */
    apiKey: string | undefined;
    baseUrl: string | undefined;
    llmModel: string;
    embeddingModel: string;
    embeddingDimensions: number;
  };
  /**
   * Where the Embeddings calls go: EMBEDDING_BASE_URL and EMBEDDING_API_KEY, each the chat's
   * (OPENAI_BASE_URL, OPENAI_API_KEY) when unset, so one server serves both unless told otherwise.
   */
  embeddings: ProviderEndpoint;
  /**
   * Recall's optional reranker: `baseUrl` serves `POST {baseUrl}/rerank` (or is that URL) (vLLM, llama.cpp server,
   * Jina, Cohere); unset, the chat model reranks. `model` is omitted from the request when unset
   * (a server with one model needs none); `apiKey` is sent as a Bearer token when set.
   */
  rerank: { baseUrl: string | undefined; apiKey: string | undefined; model: string | undefined };
  corsOrigins: string[];
  retryIntervalMs: number;
  /** How long a key's stored answer is replayed, from its first request (IDEMPOTENCY_TTL_MS). */
  idempotencyTtlMs: number;
  qstash: {
    token: string | undefined;
    url: string | undefined;
    currentSigningKey: string | undefined;
    nextSigningKey: string | undefined;
  };
  publicBaseUrl: string | undefined;
  /**
   * Webhook delivery: `allowHttp` (WEBHOOKS_ALLOW_HTTP), the per-attempt timeout
   * (WEBHOOK_TIMEOUT_MS), and how many days a finished delivery is kept (WEBHOOK_RETENTION_DAYS;
   * 0: for ever).
   */
  webhooks: { allowHttp: boolean; timeoutMs: number; retentionDays: number };
  /** The Node.js host: how long an idle keep-alive connection is kept (KEEP_ALIVE_TIMEOUT_MS). */
  keepAliveTimeoutMs: number;
  /** The Node.js host: how long a client may take to send a request's headers (HEADERS_TIMEOUT_MS). */
  headersTimeoutMs: number;
  /** Both hosts: the least severe level logged (LOG_LEVEL). */
  logLevel: LogLevel;
  /** The Node.js host: the bearer token of GET /metrics (METRICS_TOKEN); no /metrics when unset. */
  metricsToken: string | undefined;
  /** The Node.js host: where and how traces are exported (OTEL_*); undefined when tracing is off. */
  tracing: TracingConfig | undefined;
  /** How long a request waits for a model call on its path, retries included (fixed: PROVIDER_DEADLINES). */
  providerDeadlines: ProviderDeadlines;
}

export interface ProviderDeadlines {
  /** Recall's and the episode search's query embedding; then recall ranks by keyword and recency. */
  queryEmbeddingMs: number;
  /** Recall's synthesis; then `synthesis` is null. */
  synthesisMs: number;
  /** Add message's auto-compaction (the spec: "up to 30 seconds"); then the message is stored uncompacted. */
  inlineCompactionMs: number;
}

/**
 * The provider client's own timeout is per attempt (60 s) and it retries twice: a hung provider
 * would hold a request for three minutes. A request's calls end at these instead, and it degrades
 * as the spec says. Background work keeps the client's timeouts: nobody is waiting on it.
 */
export const PROVIDER_DEADLINES: ProviderDeadlines = {
  queryEmbeddingMs: 5_000,
  synthesisMs: 15_000,
  inlineCompactionMs: 30_000,
};

export interface TracingConfig {
  /** The full URL spans are POSTed to (…/v1/traces). */
  url: string;
  protocol: "http/protobuf" | "http/json";
  /** Sent with every export (OTEL_EXPORTER_OTLP_HEADERS: an API key of the backend). */
  headers: Record<string, string>;
  serviceName: string;
  sampler: TraceSampler;
  /** The ratio of the ratio samplers. */
  samplerArg: number;
}

/**
 * Tracing from OpenTelemetry's standard variables: on when a traces endpoint or the general one
 * is set (the general one gets `/v1/traces` appended, as the specification says) and the SDK is
 * not disabled. The traces-specific variables win over the general ones.
 */
export function tracingConfig(e: z.output<typeof configSchema>): TracingConfig | undefined {
  if (e.OTEL_SDK_DISABLED === "true") return undefined;
  const url =
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (e.OTEL_EXPORTER_OTLP_ENDPOINT && `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces`);
  if (!url) return undefined;
  return {
    url,
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf",
    headers: {
      ...otlpHeaders(e.OTEL_EXPORTER_OTLP_HEADERS),
      ...otlpHeaders(e.OTEL_EXPORTER_OTLP_TRACES_HEADERS),
    },
    serviceName: e.OTEL_SERVICE_NAME ?? "memory-service",
    sampler: e.OTEL_TRACES_SAMPLER ?? "parentbased_always_on",
    samplerArg: e.OTEL_TRACES_SAMPLER_ARG ?? 1,
  };
}

/** `key=value,key2=value2` with percent-encoded values (W3C baggage's form, as OTLP headers are written). */
export function otlpHeaders(text: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (text ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    const key = pair.slice(0, at).trim();
    const value = pair.slice(at + 1).trim();
    try {
      headers[key] = decodeURIComponent(value);
    } catch {
      headers[key] = value;
    }
  }
  return headers;
}

/**
 * Whether a model provider is configured: a key (OpenAI, or a server that wants one) or a base URL
 * (an OpenAI-compatible server that needs no key: Ollama, vLLM, llama.cpp server). Without either,
 * chat answers 500 (with a `detail` saying so) and background model work fails with an error that says so.
 */
export function providerConfigured(config: Pick<Config, "openai">): boolean {
  return endpointConfigured(config.openai);
}

/** Whether the embedding endpoint is configured (its own variables, or the chat's it defaults to). */
export function embeddingsConfigured(config: Pick<Config, "embeddings">): boolean {
  return endpointConfigured(config.embeddings);
}

const endpointConfigured = (endpoint: ProviderEndpoint) => Boolean(endpoint.apiKey || endpoint.baseUrl);

/** The environment does not parse: the message names each variable and what is wrong with it. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** One sentence naming each bad variable (never its value: it may be a secret). */
export function configErrorMessage(issues: readonly z.core.$ZodIssue[]): string {
  const problems = issues.map((issue) => {
    const name = issue.path.map(String).join(".") || "the environment";
    return `${name}: ${issue.message.replace(/^Invalid input: /, "").replace(/^./, (c) => c.toLowerCase())}`;
  });
  return `Invalid configuration: ${problems.join("; ")} (fix it in the environment, or unset it for its default).`;
}

export function parseConfig(env: Record<string, unknown>): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) throw new ConfigError(configErrorMessage(parsed.error.issues));
  const e = parsed.data;
  return {
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    neonFetchEndpoint: e.NEON_FETCH_ENDPOINT,
    pgliteDir: e.PGLITE_DIR,
    pgliteDurability: e.PGLITE_DURABILITY,
    pgliteSharedBuffers: e.PGLITE_SHARED_BUFFERS,
    adminUsername: e.ADMIN_USERNAME,
    adminPassword: e.ADMIN_PASSWORD,
    openai: {
      apiKey: e.OPENAI_API_KEY,
      baseUrl: e.OPENAI_BASE_URL,
      llmModel: e.LLM_MODEL,
      embeddingModel: e.EMBEDDING_MODEL,
      embeddingDimensions: e.EMBEDDING_DIMENSIONS,
    },
    embeddings: {
      apiKey: e.EMBEDDING_API_KEY ?? e.OPENAI_API_KEY,
      baseUrl: e.EMBEDDING_BASE_URL ?? e.OPENAI_BASE_URL,
    },
    rerank: { baseUrl: e.RERANK_BASE_URL, apiKey: e.RERANK_API_KEY, model: e.RERANK_MODEL },
    corsOrigins: e.CORS_ORIGIN.split(",")
      .map((o) => o.trim())
      .filter(Boolean),
    retryIntervalMs: e.RETRY_INTERVAL_MS,
    idempotencyTtlMs: e.IDEMPOTENCY_TTL_MS,
    qstash: {
      token: e.QSTASH_TOKEN,
      url: e.QSTASH_URL,
      currentSigningKey: e.QSTASH_CURRENT_SIGNING_KEY,
      nextSigningKey: e.QSTASH_NEXT_SIGNING_KEY,
    },
    publicBaseUrl: e.PUBLIC_BASE_URL,
    webhooks: {
      allowHttp: e.WEBHOOKS_ALLOW_HTTP,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      retentionDays: e.WEBHOOK_RETENTION_DAYS,
    },
    keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
    // One second above the keep-alive timeout unless set.
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS ?? e.KEEP_ALIVE_TIMEOUT_MS + 1000,
    logLevel: e.LOG_LEVEL,
    metricsToken: e.METRICS_TOKEN,
    tracing: tracingConfig(e),
    providerDeadlines: PROVIDER_DEADLINES,
  };
}

import { describe, expect, it } from "vitest";
import { ConfigError, otlpHeaders, parseConfig } from "./config";

/** Issue 36's variables: METRICS_TOKEN and OpenTelemetry's standard OTEL_* ones. */
describe("observability configuration", () => {
  it("is off by default", () => {
    const config = parseConfig({});
    expect(config.metricsToken).toBeUndefined();
    expect(config.tracing).toBeUndefined();
  });

  it("refuses a short metrics token, naming the variable", () => {
    expect(() => parseConfig({ METRICS_TOKEN: "short" })).toThrow(ConfigError);
    expect(() => parseConfig({ METRICS_TOKEN: "short" })).toThrow(/METRICS_TOKEN: at least 16 characters/);
    expect(parseConfig({ METRICS_TOKEN: " a-long-enough-token-1234 " }).metricsToken).toBe("a-long-enough-token-1234");
  });

  it("traces to the general endpoint's /v1/traces, as protobuf, with OpenTelemetry's defaults", () => {
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing).toEqual({
      url: "http://collector:4318/v1/traces",
      protocol: "http/protobuf",
      headers: {},
      serviceName: "memory-service",
      sampler: "parentbased_always_on",
      samplerArg: 1,
    });
  });

  it("lets the traces variables win over the general ones", () => {
    const tracing = parseConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example.com/otlp/v1/traces",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: "x-team=memory,api-key=general",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "api-key=a%20b%3Dc",
      OTEL_SERVICE_NAME: "memory-eu",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
    }).tracing;
    expect(tracing).toEqual({
      url: "https://traces.example.com/otlp/v1/traces",
      protocol: "http/json",
      headers: { "x-team": "memory", "api-key": "a b=c" },
      serviceName: "memory-eu",
      sampler: "parentbased_traceidratio",
      samplerArg: 0.25,
    });
  });

  it("is off with OTEL_SDK_DISABLED=true, and refuses gRPC and unknown samplers", () => {
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }).tracing).toBe(
      undefined,
    );
    expect(() => parseConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL: http\/protobuf or http\/json/,
    );
    expect(() => parseConfig({ OTEL_TRACES_SAMPLER: "sometimes" })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => parseConfig({ OTEL_TRACES_SAMPLER_ARG: "2" })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(() => parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    // A host and port without a scheme parses as a URL of scheme "localhost:", and exported nothing.
    expect(() => parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT: an http:\/\/ or https:\/\/ URL/,
    );
    expect(() => parseConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://c/v1/traces" })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/,
    );
    // OpenTelemetry reads it in any case.
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "TRUE" }).tracing).toBe(
      undefined,
    );
  });

  it("reads OTLP headers as key=value pairs with percent-encoded values", () => {
    expect(otlpHeaders("a=1, b = two%2C ,bad,=x,c=%E0%A4%A")).toEqual({ a: "1", b: "two,", c: "%E0%A4%A" });
    expect(otlpHeaders(undefined)).toEqual({});
  });
});

describe("EMBEDDING_DIMENSIONS", () => {
  it("takes 1-4000 (what pgvector indexes), and refuses more before a database is opened", () => {
    expect(parseConfig({}).openai.embeddingDimensions).toBe(1536);
    expect(parseConfig({ EMBEDDING_DIMENSIONS: "4000" }).openai.embeddingDimensions).toBe(4000);
    expect(() => parseConfig({ EMBEDDING_DIMENSIONS: "5000" })).toThrow(ConfigError);
    expect(() => parseConfig({ EMBEDDING_DIMENSIONS: "5000" })).toThrow(/EMBEDDING_DIMENSIONS: too big/);
    expect(() => parseConfig({ EMBEDDING_DIMENSIONS: "0" })).toThrow(/EMBEDDING_DIMENSIONS/);
  });
});

describe("webhook delivery retention", () => {
  it("keeps finished deliveries 30 days by default, for ever with 0, and refuses a negative or fractional count", () => {
    expect(parseConfig({}).webhooks.retentionDays).toBe(30);
    expect(parseConfig({ WEBHOOK_RETENTION_DAYS: "0" }).webhooks.retentionDays).toBe(0);
    expect(parseConfig({ WEBHOOK_RETENTION_DAYS: "90" }).webhooks.retentionDays).toBe(90);
    expect(() => parseConfig({ WEBHOOK_RETENTION_DAYS: "-1" })).toThrow(/WEBHOOK_RETENTION_DAYS/);
    expect(() => parseConfig({ WEBHOOK_RETENTION_DAYS: "1.5" })).toThrow(/WEBHOOK_RETENTION_DAYS/);
  });
});

describe("limits", () => {
  it("refuses a port past 65535, and a delay no timer can take (2^31 ms and more), naming the variable", () => {
    expect(parseConfig({ PORT: "65535" }).port).toBe(65_535);
    expect(() => parseConfig({ PORT: "70000" })).toThrow(/PORT/);
    for (const name of ["RETRY_INTERVAL_MS", "WEBHOOK_TIMEOUT_MS", "KEEP_ALIVE_TIMEOUT_MS", "HEADERS_TIMEOUT_MS"]) {
      expect(() => parseConfig({ [name]: "2147483647" }), name).not.toThrow();
      expect(() => parseConfig({ [name]: "3000000000" }), name).toThrow(new RegExp(name));
    }
    // Not a timer: an expiry date, up to a year away (30 days was taken before, and still is).
    expect(() => parseConfig({ IDEMPOTENCY_TTL_MS: String(30 * 86_400_000) })).not.toThrow();
    expect(() => parseConfig({ IDEMPOTENCY_TTL_MS: String(367 * 86_400_000) })).toThrow(/IDEMPOTENCY_TTL_MS/);
    expect(parseConfig({ WEBHOOK_RETENTION_DAYS: "36500" }).webhooks.retentionDays).toBe(36_500);
    expect(() => parseConfig({ WEBHOOK_RETENTION_DAYS: "1000000" })).toThrow(/WEBHOOK_RETENTION_DAYS/);
  });
});

describe("PGLITE_DURABILITY", () => {
  it("is full when unset or blank, read in any case, and refuses anything else", () => {
    for (const value of [undefined, "", " ", "FULL"])
      expect(parseConfig({ PGLITE_DURABILITY: value }).pgliteDurability).toBe("full");
    expect(parseConfig({ PGLITE_DURABILITY: "Fast" }).pgliteDurability).toBe("fast");
    expect(() => parseConfig({ PGLITE_DURABILITY: "sometimes" })).toThrow(/PGLITE_DURABILITY/);
  });
});

describe("DATABASE_URL", () => {
  it("takes a postgres:// or postgresql:// URL, a Unix socket's too, and refuses anything else", () => {
    for (const url of [
      "postgres://u:p@db.example.com:5432/memory",
      "postgresql://u:p@ep-x.neon.tech/neondb?sslmode=require",
      "postgres:///memory?host=/var/run/postgresql",
    ]) {
      expect(parseConfig({ DATABASE_URL: url }).databaseUrl).toBe(url);
    }
    for (const url of ["notaurl", "mysql://db/memory", "postgres://[bad", "http://db/memory"]) {
      expect(() => parseConfig({ DATABASE_URL: url }), url).toThrow(/DATABASE_URL: a postgres:\/\/ URL/);
    }
    expect(parseConfig({ DATABASE_URL: "  " }).databaseUrl).toBeUndefined();
  });
});

describe("PGLITE_SHARED_BUFFERS", () => {
  it("takes 128kB to 1400MB, refusing at start what the embedded database would fail to start with", () => {
    for (const size of ["128kB", "32MB", "1400MB"]) {
      expect(parseConfig({ PGLITE_SHARED_BUFFERS: size }).pgliteSharedBuffers, size).toBe(size);
    }
    for (const size of ["64kB", "2GB", "1401MB", "32mb"]) {
      expect(() => parseConfig({ PGLITE_SHARED_BUFFERS: size }), size).toThrow(/PGLITE_SHARED_BUFFERS/);
    }
  });
});

describe("blank variables and base URLs", () => {
  it("take the default when blank (docker-compose's value of an unset variable), spaces included", () => {
    const blank = parseConfig({ LLM_MODEL: "", EMBEDDING_MODEL: " ", CORS_ORIGIN: "", PORT: " " });
    expect(blank.openai).toMatchObject({ llmModel: "gpt-4o-mini", embeddingModel: "text-embedding-3-small" });
    expect(blank.corsOrigins).toEqual(["http://localhost:5173", "http://127.0.0.1:5173"]);
    expect(blank.port).toBe(8787);
  });

  it("refuses a server URL without its scheme at start, naming the variable", () => {
    for (const name of ["OPENAI_BASE_URL", "EMBEDDING_BASE_URL", "RERANK_BASE_URL", "QSTASH_URL", "PUBLIC_BASE_URL"]) {
      expect(() => parseConfig({ [name]: "localhost:11434/v1" }), name).toThrow(new RegExp(name));
      expect(() => parseConfig({ [name]: "http://127.0.0.1:11434/v1" }), name).not.toThrow();
    }
    expect(parseConfig({ OPENAI_BASE_URL: "  " }).openai.baseUrl).toBeUndefined();
  });
});

describe("ADMIN_USERNAME", () => {
  it("is trimmed as a username typed in the dashboard is; blank is the default, admin", () => {
    expect(parseConfig({ ADMIN_USERNAME: "  ops  " }).adminUsername).toBe("ops");
    expect(parseConfig({ ADMIN_USERNAME: "   " }).adminUsername).toBe("admin");
    expect(parseConfig({}).adminUsername).toBe("admin");
    expect(() => parseConfig({ ADMIN_USERNAME: "x".repeat(101) })).toThrow(/ADMIN_USERNAME/);
  });
});

import { describe, expect, it } from "vitest";
import { forwardedWorkerVars } from "./worker-vars";

describe("forwardedWorkerVars", () => {
  it("passes the service's settings that npm start reads, not secrets, the database or Node's own", () => {
    const forwarded = {
      WEBHOOKS_ALLOW_HTTP: "true",
      LOG_LEVEL: "error",
      IDEMPOTENCY_TTL_MS: "60000",
      WEBHOOK_TIMEOUT_MS: "500",
      WEBHOOK_RETENTION_DAYS: "7",
      EMBEDDING_BASE_URL: "http://127.0.0.1:9/v1",
      LLM_MODEL: "m",
    };
    const left = {
      OPENAI_API_KEY: "sk-secret",
      RERANK_API_KEY: "secret",
      QSTASH_TOKEN: "secret",
      METRICS_TOKEN: "a-long-enough-token-1234",
      DATABASE_URL: "postgres://x@y/z",
      PGLITE_DIR: "/tmp/x",
      PORT: "1",
      HOME: "/root",
      CORS_ORIGIN: "",
    };
    expect(forwardedWorkerVars({ ...forwarded, ...left })).toEqual(forwarded);
  });
});

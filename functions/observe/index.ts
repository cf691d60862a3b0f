import type { Handler, MiddlewareHandler } from "hono";
import type { Clock } from "../../lib/clock";
import type { Config } from "../../lib/config";
import type { Database } from "../../lib/db/types";
import { errorFields, type Logger } from "../../lib/log";
import { settledWithin } from "../../lib/settled-within";
import { installTelemetry } from "../../lib/telemetry";
import { version } from "../../package.json";
import type { AppEnv } from "../env";
import type { Tracing } from "./tracing";

/** How long a shutdown waits for the trace exporter's last batch. */
export const TRACE_EXPORT_GRACE_MS = 2_000;

/** What the Node.js host adds to the app when METRICS_TOKEN or OTEL_EXPORTER_OTLP_ENDPOINT is set. */
export interface Observability {
  /** Run first, before every other middleware: the request's span, then its metrics. */
  middleware: MiddlewareHandler<AppEnv>[];
  /** GET /metrics, when METRICS_TOKEN is set. */
  metrics?: Handler<AppEnv>;
  /** Exports the spans ended so far (tests). */
  flush(): Promise<void>;
  /** Uninstalls the hooks and flushes and stops the trace exporter. */
  close(): Promise<void>;
}

/**
 * The Node.js host's metrics and traces, each loaded (prom-client, the OpenTelemetry SDK) only when
 * its variable is set; undefined when neither is, and then nothing of this runs per request.
 */
export async function startObservability(options: {
  config: Config;
  database: Database;
  clock: Clock;
  log: Logger;
}): Promise<Observability | undefined> {
  const { config } = options;
  if (!config.metricsToken && !config.tracing) return undefined;
  const uninstall: (() => void)[] = [];
  const middleware: MiddlewareHandler<AppEnv>[] = [];
  let tracing: Tracing | undefined;
  if (config.tracing) {
    const [{ startTracing }, { requestSpan }] = await Promise.all([import("./tracing"), import("./request-span")]);
    // package.json's, however the process was started (npm sets npm_package_version; node alone does not).
    tracing = await startTracing(config.tracing, version);
    uninstall.push(installTelemetry(tracing.telemetry));
    middleware.push(requestSpan);
  }
  let metrics: Handler<AppEnv> | undefined;
  if (config.metricsToken) {
    const { createMetrics } = await import("./metrics");
    const created = createMetrics({ ...options, token: config.metricsToken });
    uninstall.push(installTelemetry(created.telemetry));
    middleware.push(created.middleware);
    metrics = created.handler;
  }
  return {
    middleware,
    metrics,
    flush: async () => {
      await tracing?.flush();
    },
    async close() {
      for (const remove of uninstall) remove();
      if (!tracing) return;
      // The last spans are worth a short wait, never a failed or stalled shutdown: a collector
      // that is down costs only its traces (the exporter's own timeout is 10 s).
      const exported = tracing.shutdown().catch((err) => {
        options.log.warn("tracing: the last spans were not exported", errorFields(err));
      });
      if ((await settledWithin(exported, TRACE_EXPORT_GRACE_MS)) === "late") {
        options.log.warn("tracing: the last spans were not exported in time", { graceMs: TRACE_EXPORT_GRACE_MS });
      }
    },
  };
}

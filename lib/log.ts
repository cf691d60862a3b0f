import { DrizzleQueryError } from "drizzle-orm";
import { HttpError, ProviderError } from "./errors";

/** Structured one-line JSON logs: readable by Workers Logs and any log shipper. */
export interface Logger {
  error(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  debug(message: string, fields?: Record<string, unknown>): void;
}

/** Most to least severe; a logger at a level writes that level and every one before it. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Where a line goes: errors to stderr, the rest to stdout (the console on Workers). */
export type LogSink = (level: LogLevel, line: string) => void;

const consoleSink: LogSink = (level, line) => {
  if (level === "error") console.error(line);
  else console.log(line);
};

/** A logger writing `level` and the levels more severe than it, one JSON object per line. */
export function createLogger(options: { level?: LogLevel; sink?: LogSink } = {}): Logger {
  const rank = LOG_LEVELS.indexOf(options.level ?? "info");
  const sink = options.sink ?? consoleSink;
  const at = (level: LogLevel) =>
    LOG_LEVELS.indexOf(level) > rank
      ? () => {}
      : (message: string, fields?: Record<string, unknown>) =>
          sink(level, JSON.stringify({ level, message, ...fields, time: new Date().toISOString() }));
  return { error: at("error"), warn: at("warn"), info: at("info"), debug: at("debug") };
}

/** The default logger (level info), for code that runs before a host has read LOG_LEVEL. */
export const consoleLogger: Logger = createLogger();

export const silentLogger: Logger = { error() {}, warn() {}, info() {}, debug() {} };

/**
 * An error as log fields. The stack is kept only for unexpected errors: a client error (an
 * `HttpError` below 500) or a provider failure (`ProviderError`, already stored as the episode's
 * or extraction's error and shown in the dashboard) is a message, not a bug to trace.
 */
export function errorFields(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { error: String(err) };
  if (isExpectedError(err)) return { error: err.message };
  // A driver's error wrapped by the query builder ("Failed query: ...") says why in its cause.
  const cause = err.cause instanceof Error ? { cause: loggableMessage(err.cause) } : {};
  const message = loggableMessage(err);
  if (message === err.message) return { error: message, ...cause, stack: err.stack };
  // The stack repeats the message: redacted the same way, or left out when it cannot be.
  const header = `${err.name}: ${err.message}`;
  const stack = err.stack?.startsWith(header) ? `${err.name}: ${message}${err.stack.slice(header.length)}` : undefined;
  return { error: message, ...cause, ...(stack ? { stack } : {}) };
}

/**
 * An error's message fit for the logs and traces. The query builder's own message lists the
 * statement's parameters, which are the request's data (a message's text, a credential's hash, a
 * username): they keep the statement and how many parameters it had, never their values.
 */
export function loggableMessage(err: Error): string {
  if (!(err instanceof DrizzleQueryError)) return err.message;
  return `Failed query: ${err.query}\n(${err.params.length} parameters, not logged)`;
}

/** Failures the service expects and reports as they are: no stack trace in the logs. */
export function isExpectedError(err: unknown): boolean {
  return err instanceof ProviderError || (err instanceof HttpError && err.status < 500);
}

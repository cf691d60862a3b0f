/** Structured one-line JSON logs: readable by Workers Logs and any log shipper. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

function emit(level: string, message: string, fields?: Record<string, unknown>) {
  const line = JSON.stringify({ level, message, ...fields, time: new Date().toISOString() });
  if (level === "error") console.error(line);
  else console.log(line);
}

export const consoleLogger: Logger = {
  info: (m, f) => emit("info", m, f),
  warn: (m, f) => emit("warn", m, f),
  error: (m, f) => emit("error", m, f),
};

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

export function errorFields(err: unknown): Record<string, unknown> {
  return err instanceof Error ? { error: err.message, stack: err.stack } : { error: String(err) };
}

import { type SpanOptions, telemetry, withSpan } from "../telemetry";

/** Longer statement texts are cut in a span (recall's is ~14 kB); values are never in the text. */
const MAX_TEXT = 2048;

/** The first keyword of a statement (SELECT, WITH, INSERT…), its `db.operation.name`. */
export function operationOf(text: string): string {
  return /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() ?? "QUERY";
}

/** A statement's span, after OpenTelemetry's database conventions: the text, never its parameters. */
export function statementSpan(text: string): { name: string; options: SpanOptions } {
  const operation = operationOf(text);
  return {
    name: operation,
    options: {
      kind: "client",
      attributes: {
        "db.system.name": "postgresql",
        "db.operation.name": operation,
        "db.query.text": text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text,
      },
    },
  };
}

const TRANSACTION_SPAN: SpanOptions = {
  kind: "client",
  attributes: { "db.system.name": "postgresql", "db.operation.name": "TRANSACTION" },
};

/** The statement's text: drivers take it alone or as `{ text, values }` (node-postgres). */
function textOf(statement: unknown): string {
  if (typeof statement === "string") return statement;
  const text = (statement as { text?: unknown } | null)?.text;
  return typeof text === "string" ? text : "";
}

/**
 * A driver's query function with one span per statement when tracing is on (a statement group:
 * a transaction is one span, see {@link tracedTransaction}). When off, one property read a call.
 */
export function tracedQuery<F extends (...args: never[]) => unknown>(query: F): F {
  const run = query as unknown as (this: unknown, ...args: unknown[]) => Promise<unknown>;
  return function tracedStatement(this: unknown, ...args: unknown[]) {
    if (!telemetry().span) return run.apply(this, args);
    const { name, options } = statementSpan(textOf(args[0]));
    return withSpan(name, options, () => run.apply(this, args));
  } as unknown as F;
}

/** A transaction's statements as one span (their group), when tracing is on. */
export function tracedTransaction<T>(run: () => Promise<T>): Promise<T> {
  return telemetry().span ? withSpan("TRANSACTION", TRANSACTION_SPAN, run) : run();
}

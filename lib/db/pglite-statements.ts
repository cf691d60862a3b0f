import { type PGlite, parse, protocol, type QueryOptions, type Results } from "@electric-sql/pglite";
import { GENERIC_PLAN_RUNS, wantsGenericPlan } from "./generic-plan";
import { halfvecBinary, halfvecBinaryOf } from "./halfvec-binary";
import { StatementCache, type StatementStep } from "./statement-cache";
import { VectorValue } from "./vectors";

/**
 * Named statements kept per embedded database. Each holds its parsed and analysed query (and,
 * after five runs, Postgres's generic plan for comparison) in the database's WASM memory, so the
 * set is bounded; the service runs a few dozen distinct statement texts on its hot paths, and the
 * server's RSS under the bench's load was the same with and without them (bench/RESULTS.md).
 */
export const PREPARED_STATEMENTS = 32;

export type QueryFn = <T>(text: string, params?: unknown[], options?: QueryOptions) => Promise<Results<T>>;

/** Postgres refuses to run a prepared statement whose result columns changed under it (DDL). */
function isStaleResultType(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: string; message?: string };
  return code === "0A000" && /cached plan must not change result type/.test(message ?? "");
}

/**
 * PGlite's `query`, with a statement text seen before run as a named statement: Postgres parses
 * and analyses it once instead of on every call. The service's statements are long (recall's is
 * 14 kB with some 40 CTE and subquery nodes), and parsing and analysing it took ~4 ms of a 22 ms
 * recall at 10,000 facts (bench/RESULTS.md). Postgres still plans each run with its parameters
 * (custom plans; it switches to a generic plan only when that is no costlier), except for a
 * statement marked for its generic plan (lib/db/generic-plan.ts), renewed every
 * GENERIC_PLAN_RUNS runs. The messages are
 * PGlite's own extended-protocol sequence (parse, describe, bind, describe, execute, sync) with a
 * statement name, a run's four sent as one buffer, under the same two locks its `query` takes, so
 * a call never interleaves with another or lands inside another caller's transaction; a COPY with
 * a blob runs through PGlite.
 */
export function preparedQuery(
  client: PGlite,
  cache = new StatementCache(PREPARED_STATEMENTS, (text) =>
    wantsGenericPlan(text) ? GENERIC_PLAN_RUNS : Number.POSITIVE_INFINITY,
  ),
): QueryFn {
  const types: ExtensionTypes = {};
  return async function query<T>(text: string, params: unknown[] = [], options?: QueryOptions) {
    if (options?.blob || options?.paramTypes) return client.query<T>(text, params, options);
    await client._checkReady();
    // The cache is consulted under the locks, so two callers never prepare the same text twice.
    const result = await client._runExclusiveTransaction(() =>
      client._runExclusiveQuery(async () => {
        const step = cache.step(text);
        return step.kind === "plain" ? undefined : runNamed<T>(client, { cache, types }, text, params, options, step);
      }),
    );
    return result ?? client.query<T>(text, params, options);
  };
}

type NamedStep = Exclude<StatementStep, { kind: "plain" }>;

/** The OIDs of extension types sent in binary (null: not installed yet, looked up again later). */
interface ExtensionTypes {
  halfvec?: number | null;
}

type Send = (message: Uint8Array) => ReturnType<PGlite["execProtocolStream"]>;

/** pgvector's halfvec OID, once the extension exists (looked up when a statement is prepared). */
async function lookUpHalfvec(send: Send, types: ExtensionTypes): Promise<void> {
  if (types.halfvec) return;
  const messages = await send(protocol.serialize.query("SELECT to_regtype('halfvec')::oid::int4 AS oid"));
  const [result] = parse.parseResults(messages, {});
  const oid = Number((result?.rows[0] as { oid?: unknown } | undefined)?.oid);
  types.halfvec = Number.isInteger(oid) && oid > 0 ? oid : null;
}

/**
 * A parameter's wire value: PGlite's serializer for its type, or its text; a halfvec goes in
 * binary, from its numbers (a VectorValue) or its text form (halfvecBinary): no float parsing in
 * the database.
 */
function wireValue(
  client: PGlite,
  types: ExtensionTypes,
  type: number | undefined,
  value: unknown,
  options?: QueryOptions,
) {
  if (value === null || value === undefined) return null;
  if (type !== undefined && type === types.halfvec) {
    const binary =
      value instanceof VectorValue
        ? halfvecBinaryOf(value.values)
        : typeof value === "string"
          ? halfvecBinary(value)
          : undefined;
    if (binary) return binary;
  }
  const serializer = type === undefined ? undefined : (options?.serializers?.[type] ?? client.serializers[type]);
  return serializer ? serializer(value) : String(value);
}

/** The messages as one buffer: PGlite's backend reads them all in one call into the WASM module. */
function joined(messages: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(messages.reduce((n, m) => n + m.length, 0));
  let at = 0;
  for (const m of messages) {
    out.set(m, at);
    at += m.length;
  }
  return out;
}

/** One call on a named statement; undefined when it went stale (the caller then runs the text plain). */
async function runNamed<T>(
  client: PGlite,
  { cache, types }: { cache: StatementCache; types: ExtensionTypes },
  text: string,
  params: unknown[],
  options: QueryOptions | undefined,
  step: NamedStep,
): Promise<Results<T> | undefined> {
  const { serialize } = protocol;
  const send = (message: Uint8Array) => client.execProtocolStream(message, { syncToFs: false });
  const failed = (err: unknown) => Object.assign(err as object, { query: text, params, queryOptions: options });
  let paramTypes: number[];
  if (step.kind === "prepare") {
    try {
      await lookUpHalfvec(send, types);
      if (step.close) await send(serialize.close({ type: "S", name: step.close }));
      await send(serialize.parse({ name: step.name, text }));
      paramTypes = parse.parseDescribeStatementResults(await send(serialize.describe({ type: "S", name: step.name })));
    } catch (err) {
      throw failed(err);
    } finally {
      await send(serialize.sync());
    }
    cache.prepared(text, step.name, paramTypes);
  } else {
    paramTypes = step.paramTypes;
  }
  let values: ReturnType<typeof wireValue>[];
  try {
    values = params.map((value, k) => wireValue(client, types, paramTypes[k], value, options));
  } catch (err) {
    throw failed(err);
  }
  // One buffer for the whole run: bind, describe, execute and sync, and for a statement marked for
  // its generic plan the setting around them (Postgres chooses the plan when the statement is
  // bound). After an error Postgres skips to the Sync, so the setting is put back whatever
  // happened, before anything else runs on the connection. Sent apart, the six messages were six
  // calls into the WASM module; the setting's two simple queries still run (a per-connection
  // setting would give every other statement, the unnamed ones too, a generic plan).
  const generic = wantsGenericPlan(text);
  const run = [
    serialize.bind({ statement: step.name, values }),
    serialize.describe({ type: "P" }),
    serialize.execute({}),
    serialize.sync(),
  ];
  let messages: Awaited<ReturnType<typeof send>>;
  try {
    messages = await send(
      joined(
        generic
          ? [
              serialize.query("SET plan_cache_mode = force_generic_plan"),
              ...run,
              serialize.query("RESET plan_cache_mode"),
            ]
          : run,
      ),
    );
  } catch (err) {
    if (!isStaleResultType(err)) throw failed(err);
    cache.forget(text);
    await send(serialize.close({ type: "S", name: step.name }));
    await send(serialize.sync());
    return undefined;
  }
  await client.syncToFs();
  // With the setting around it, the statement's result follows the SET's.
  return parse.parseResults(messages, ...parserArgs(client, options))[generic ? 1 : 0] as Results<T>;
}

/**
 * parseResults' parsers and options, the call's own parsers (drizzle passes four with every
 * query) put in front of the database's by a prototype link. Given both, parseResults copies the
 * database's 318 parsers into a new object on every call: ~0.25 ms a statement, more than an
 * add message statement's own run in the database (bench/RESULTS.md).
 */
export function parserArgs(
  client: Pick<PGlite, "parsers">,
  options: QueryOptions | undefined,
): [PGlite["parsers"], QueryOptions | undefined] {
  if (!options?.parsers) return [client.parsers, options];
  return [Object.assign(Object.create(client.parsers), options.parsers), { ...options, parsers: undefined }];
}

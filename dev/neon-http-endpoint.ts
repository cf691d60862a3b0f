import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { type PGlite, type QueryOptions, types } from "@electric-sql/pglite";
import type pg from "pg";
import { listen } from "../functions/listen";
import { pgPoolOf } from "../lib/db/pg";
import { pgliteClientOf } from "../lib/db/pglite";
import type { Database } from "../lib/db/types";

/**
 * A local stand-in for Neon's SQL-over-HTTP endpoint, backed by the embedded database (or by a
 * PostgreSQL server through node-postgres: `npm run test:pg` runs the edge suites so), so the
 * Worker's real driver (`@neondatabase/serverless` `neon()` under drizzle-orm/neon-http) can be run
 * in tests and `npm run dev` with no network. Point the driver at it with
 * `neonConfig.fetchEndpoint` (NEON_FETCH_ENDPOINT=`<url>/sql`), as drizzle-orm's own neon-http
 * integration tests do with a local Postgres.
 *
 * The protocol, as the driver speaks it (version 1.x):
 * - `POST /sql`, body `{query, params}`; or `{queries: [{query, params}, ...]}` for
 *   `sql.transaction()` / drizzle's `db.batch()`, which Neon runs as one transaction. Params arrive
 *   already serialised to Postgres text (the driver runs node-postgres' `prepareValue`) or null.
 * - Headers: `Neon-Connection-String` (ignored: there is one database here), `Neon-Raw-Text-Output:
 *   true` (values are returned in Postgres text format and parsed by the driver with pg-types by
 *   `dataTypeID`), `Neon-Array-Mode` (rows as arrays rather than objects), and for batches
 *   `Neon-Batch-Isolation-Level`, `Neon-Batch-Read-Only`, `Neon-Batch-Deferrable`.
 * - 200 with `{command, rowCount, rows, fields: [{name, dataTypeID, ...}], rowAsArray}`, or
 *   `{results: [...]}` for a batch. A Postgres error is a 400 with the error's fields
 *   (`message`, `code`, `detail`, `constraint`, ...), which the driver copies onto its `NeonDbError`.
 */
export interface NeonHttpEndpointOptions {
  database: Database;
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /** Called once per HTTP request with its statements (one, or a batch's); tests count round trips. */
  onRequest?: (queries: string[]) => void;
}

export interface NeonHttpEndpoint {
  /** Base URL, e.g. `http://127.0.0.1:54321`. */
  url: string;
  /** What the driver's `fetchEndpoint` (NEON_FETCH_ENDPOINT) must be: `<url>/sql`. */
  fetchEndpoint: string;
  close(): Promise<void>;
}

interface QueryBody {
  query: string;
  params?: unknown[];
}

interface NeonField {
  name: string;
  tableID: number;
  columnID: number;
  dataTypeID: number;
  dataTypeSize: number;
  dataTypeModifier: number;
  format: "text";
}

interface NeonResult {
  command: string | null;
  rowCount: number | null;
  rows: unknown[];
  fields: NeonField[];
  rowAsArray: boolean;
}

/** Request bodies above this size are refused (Neon's own limit is of the same order). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

const ERROR_FIELDS = [
  "severity",
  "code",
  "detail",
  "hint",
  "position",
  "internalPosition",
  "internalQuery",
  "where",
  "schema",
  "table",
  "column",
  "dataType",
  "constraint",
  "file",
  "line",
  "routine",
] as const;

const ISOLATION_LEVELS: Record<string, string> = {
  ReadUncommitted: "READ UNCOMMITTED",
  ReadCommitted: "READ COMMITTED",
  RepeatableRead: "REPEATABLE READ",
  Serializable: "SERIALIZABLE",
};

class BadRequest extends Error {}

/** What the endpoint runs statements on: one statement, or a batch as one transaction. */
interface SqlBackend {
  query(body: QueryBody, arrayMode: boolean): Promise<NeonResult>;
  transaction(preamble: string | undefined, queries: QueryBody[], arrayMode: boolean): Promise<NeonResult[]>;
}

export async function startNeonHttpEndpoint(options: NeonHttpEndpointOptions): Promise<NeonHttpEndpoint> {
  const backend =
    options.database.kind === "pg"
      ? pgBackend(pgPoolOf(options.database))
      : pgliteBackend(pgliteClientOf(options.database));
  const server = createServer((req, res) => {
    handle(backend, req, res, options.onRequest).catch((err) => {
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, { message: String(err) });
    });
  });
  const host = options.host ?? "127.0.0.1";
  const port = await listen(server, options.port, host);
  const url = `http://${host}:${port}`;
  return {
    url,
    fetchEndpoint: `${url}/sql`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function handle(
  backend: SqlBackend,
  req: IncomingMessage,
  res: ServerResponse,
  onRequest: NeonHttpEndpointOptions["onRequest"],
): Promise<void> {
  const path = new URL(req.url ?? "/", "http://localhost").pathname;
  if (path !== "/sql") return sendJson(res, 404, { message: `Not found: ${path}` });
  if (req.method !== "POST") return sendJson(res, 405, { message: "Use POST" });
  const arrayMode = header(req, "neon-array-mode") === "true";
  try {
    const body = parseBody(await readBody(req));
    onRequest?.("queries" in body ? body.queries.map((q) => q.query) : [body.query]);
    if ("queries" in body) {
      // All-or-nothing, as on Neon: one transaction, rolled back by the first error.
      const results = await backend.transaction(batchPreamble(req), body.queries, arrayMode);
      return sendJson(res, 200, { results });
    }
    return sendJson(res, 200, await backend.query(body, arrayMode));
  } catch (err) {
    return sendJson(res, 400, errorBody(err));
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new BadRequest("Request body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parseBody(text: string): QueryBody | { queries: QueryBody[] } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BadRequest("Request body is not valid JSON");
  }
  const isQuery = (q: unknown): q is QueryBody =>
    typeof q === "object" &&
    q !== null &&
    typeof (q as QueryBody).query === "string" &&
    ((q as QueryBody).params === undefined || Array.isArray((q as QueryBody).params));
  if (typeof body === "object" && body !== null && "queries" in body) {
    const { queries } = body as { queries: unknown };
    if (Array.isArray(queries) && queries.every(isQuery)) return { queries };
  } else if (isQuery(body)) {
    return body;
  }
  throw new BadRequest('Expected {"query": string, "params": [...]} or {"queries": [...]}');
}

/** `SET TRANSACTION ...` for a batch's `Neon-Batch-*` headers, or nothing for the defaults. */
function batchPreamble(req: IncomingMessage): string | undefined {
  const parts: string[] = [];
  const isolation = header(req, "neon-batch-isolation-level");
  if (isolation) {
    const level = ISOLATION_LEVELS[isolation];
    if (!level) throw new BadRequest(`Unknown Neon-Batch-Isolation-Level: ${isolation}`);
    parts.push(`ISOLATION LEVEL ${level}`);
  }
  const readOnly = header(req, "neon-batch-read-only");
  if (readOnly !== undefined) parts.push(readOnly === "true" ? "READ ONLY" : "READ WRITE");
  const deferrable = header(req, "neon-batch-deferrable");
  if (deferrable !== undefined) parts.push(deferrable === "true" ? "DEFERRABLE" : "NOT DEFERRABLE");
  return parts.length ? `SET TRANSACTION ${parts.join(" ")}` : undefined;
}

function pgliteBackend(client: PGlite): SqlBackend {
  const options = rawTextOptions(client);
  const run = async (db: Pick<PGlite, "query">, body: QueryBody, arrayMode: boolean) => {
    const result = await db.query<unknown[]>(body.query, body.params ?? [], options);
    return neonResult(result as RawResult, arrayMode);
  };
  return {
    query: (body, arrayMode) => run(client, body, arrayMode),
    transaction: (preamble, queries, arrayMode) =>
      client.transaction(async (tx) => {
        if (preamble) await tx.query(preamble);
        const out: NeonResult[] = [];
        for (const query of queries) out.push(await run(tx, query, arrayMode));
        return out;
      }),
  };
}

/**
 * A PostgreSQL server through a node-postgres pool: values come back as the server's text (every
 * type parser is the identity), and parameters, already Postgres text, go as they are. A batch
 * runs on one checked-out connection between BEGIN and COMMIT.
 */
function pgBackend(pool: pg.Pool): SqlBackend {
  const run = async (db: pg.Pool | pg.PoolClient, body: QueryBody, arrayMode: boolean) => {
    const values = (body.params ?? []).map((v) => (v === null || v === undefined ? null : toParamText(v)));
    const result = await db.query({ text: body.query, values, rowMode: "array", types: rawTextTypes });
    return neonResult(result as unknown as RawResult, arrayMode);
  };
  return {
    query: (body, arrayMode) => run(pool, body, arrayMode),
    async transaction(preamble, queries, arrayMode) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        if (preamble) await client.query(preamble);
        const out: NeonResult[] = [];
        for (const query of queries) out.push(await run(client, query, arrayMode));
        await client.query("COMMIT");
        return out;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
  };
}

const rawTextTypes = { getTypeParser: () => identity } as unknown as pg.CustomTypesConfig;

/** A result as both drivers give it, rows as arrays of text (or null). */
interface RawResult {
  command?: string | null;
  rowCount?: number | null;
  rows: unknown[][];
  fields: { name: string; dataTypeID: number }[];
}

function neonResult(result: RawResult, arrayMode: boolean): NeonResult {
  const fields: NeonField[] = result.fields.map((f) => ({
    name: f.name,
    tableID: 0,
    columnID: 0,
    dataTypeID: f.dataTypeID,
    dataTypeSize: -1,
    dataTypeModifier: -1,
    format: "text",
  }));
  const rows = arrayMode
    ? result.rows
    : result.rows.map((row) => Object.fromEntries(fields.map((f, i) => [f.name, row[i]])));
  return { command: result.command ?? null, rowCount: result.rowCount ?? null, rows, fields, rowAsArray: arrayMode };
}

/**
 * PGlite talks to Postgres in text format and parses each value by type; we want the text itself,
 * as Neon sends it (`Neon-Raw-Text-Output`), so the driver's own pg-types parsers run. PGlite
 * falls back to the raw text for a type it has no parser for, so overriding every parser it
 * knows (the built-ins and the array types it loaded from the catalogue) with the identity is
 * enough. Parameters arrive as Postgres text already: pass them through unchanged (PGlite's own
 * serialisers would, e.g., refuse a bytea given as `\x..` text).
 */
function rawTextOptions(client: PGlite): QueryOptions {
  const known = { ...types.parsers, ...client.parsers };
  const parsers: Record<string, (value: string) => string> = {};
  for (const key of Object.keys(known)) parsers[key] = identity;
  return { rowMode: "array", parsers, serializers: passThroughSerializers };
}

const identity = (value: string) => value;

// PGlite looks serialisers up by the parameter's type id (`serializers[oid] ?? ...`), so one
// proxy answers for every type.
const passThroughSerializers = new Proxy({} as Record<number, (value: unknown) => string>, {
  get: () => toParamText,
});

function toParamText(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function errorBody(err: unknown): Record<string, unknown> {
  const body: Record<string, unknown> = { message: err instanceof Error ? err.message : String(err) };
  if (err instanceof BadRequest) return body;
  for (const field of ERROR_FIELDS) {
    const value = (err as Record<string, unknown>)[field];
    if (value !== undefined) body[field] = value;
  }
  return body;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { PGlite, types } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { drizzle } from "drizzle-orm/pglite";
import { withFastCompile } from "./compile";
import { acquireDirLock } from "./dir-lock";
import { LeadGate, type LeadingStatement, leadFirstLog } from "./leading";
import {
  DurableNodeFS,
  PGLITE_DEFAULT_START_PARAMS,
  type PgliteDurability,
  pgliteStartParams,
  type SyncCounter,
  syncTree,
} from "./pglite-durability";
import { preparedQuery, type QueryFn } from "./pglite-statements";
import * as schema from "./schema";
import { parsePgTimestamp } from "./timestamps";
import { tracedQuery } from "./traced";
import {
  batchInTransaction,
  type Database,
  type Db,
  type LeadingDatabase,
  loggerFrom,
  type QueryHook,
  requestDatabase,
} from "./types";

export interface PgliteOptions {
  /** A directory, or `memory://` for an in-memory database. */
  dir?: string;
  /** On disk: whether a commit reaches the disk before it is acknowledged (default `full`). */
  durability?: PgliteDurability;
  /** Start from a dumped data directory (tests clone a migrated template this way). */
  loadDataDir?: Blob | File;
  onQuery?: QueryHook;
  /**
   * Postgres's shared_buffers (default PGLITE_SHARED_BUFFERS). Its pages live in the WASM
   * memory, which grows to hold them and never shrinks, so it is most of the process's RSS.
   */
  sharedBuffers?: string;
}

/**
 * PGlite starts Postgres with 128MB of shared buffers, about 120 MB of the host's RSS from the
 * first query on (measured: 352 MB at start on an existing directory, 234 MB with 16MB). Pages
 * beyond the buffers are read from the data files through the host's page cache (on disk) or
 * PGlite's in-memory file system, which are a memcpy away, not a disk read, so the embedded host
 * keeps a small pool. The bench's memory scenario measures what a size costs recall.
 */
export const PGLITE_SHARED_BUFFERS = "32MB";

/**
 * The embedded database: real Postgres 18 with pgvector, in-process. On disk it is durable by
 * default (see pglite-durability.ts) and guarded by a lock file naming its process; a lock left
 * by a dead process (and PGlite's own stale postmaster.pid) is cleared on start, while a live
 * owner makes start fail loudly.
 */
export async function createPgliteDatabase(options: PgliteOptions = {}): Promise<Database> {
  const dir = options.dir ?? "memory://";
  const onDisk = !dir.startsWith("memory://");
  const durability = options.durability ?? "full";
  let releaseLock = () => {};
  const syncs: SyncCounter = { syncs: 0 };
  let fresh = false;
  if (onDisk) {
    releaseLock = acquireDirLock(dir);
    // Nobody else owns the directory: a postmaster.pid left behind by a killed process would
    // make PGlite refuse to open it.
    rmSync(join(dir, "postmaster.pid"), { force: true });
    fresh = !existsSync(join(dir, "PG_VERSION"));
  }
  let client: PGlite;
  try {
    client = await PGlite.create({
      ...(onDisk && durability === "full" ? { fs: new DurableNodeFS(dir, syncs) } : onDisk ? { dataDir: dir } : {}),
      startParams: [
        ...(onDisk ? pgliteStartParams(durability, PGLITE_DEFAULT_START_PARAMS) : PGLITE_DEFAULT_START_PARAMS),
        "-c",
        `shared_buffers=${options.sharedBuffers ?? PGLITE_SHARED_BUFFERS}`,
      ],
      ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      extensions: { vector },
      // PGlite's own parser is `new Date(text)`, which reads the years 0001-0099 as 19xx and 20xx.
      parsers: { [types.TIMESTAMPTZ]: parsePgTimestamp, [types.TIMESTAMP]: parsePgTimestamp },
    });
  } catch (err) {
    releaseLock();
    throw err;
  }
  // initdb wrote the new cluster without our fsync hook: put it on disk once.
  if (onDisk && fresh && durability === "full") syncTree(dir);
  // PGlite is one session that does not apply database-level settings (ALTER DATABASE ... SET
  // in migration 0003), so the setting vector searches rely on is set here. (hnsw.ef_search stays
  // pgvector's default: recall sizes it per search, lib/db/vectors.ts.)
  await client.exec("SET hnsw.iterative_scan = relaxed_order");
  // A span per statement when tracing is on (a transaction's are grouped in its own span).
  const query = tracedQuery(preparedQuery(client));
  const view = { query, transaction: client.transaction.bind(client) } as unknown as PGlite;
  const db = withFastCompile(drizzle({ client: view, schema, logger: loggerFrom(options.onQuery) })) as unknown as Db;
  return {
    db,
    kind: "pglite",
    batch: (build) => batchInTransaction(db, build),
    withLeading: (lead) => leadingPglite(client, query, lead, options.onQuery),
    close: async () => {
      await client.close();
      releaseLock();
    },
    // Exposed for tests that dump a migrated template, and for counting host syncs.
    ...({ client, syncs } as object),
  };
}

/**
 * In-process, a statement costs no network trip: the lead is sent just before the request's first
 * statement (or its first transaction), on the one connection.
 */
function leadingPglite(
  client: PGlite,
  query: QueryFn,
  lead: LeadingStatement,
  onQuery: QueryHook | undefined,
): LeadingDatabase {
  const { logLead, logger } = leadFirstLog(lead, onQuery);
  const gate = new LeadGate(lead, async (leading) => {
    logLead(leading);
    return (await query<Record<string, unknown>>(leading.sql, leading.params)).rows;
  });
  const view = {
    query: async (...args: Parameters<QueryFn>) => {
      await gate.settle();
      return query(...args);
    },
    transaction: async <T>(work: Parameters<PGlite["transaction"]>[0]) => {
      await gate.settle();
      return client.transaction(work) as Promise<T>;
    },
  };
  // Without the relational schema (`db.query`, unused here): building it costs ~130 µs a request.
  const db = withFastCompile(drizzle({ client: view as unknown as PGlite, logger })) as unknown as Db;
  return requestDatabase({ db, kind: "pglite", batch: (build) => batchInTransaction(db, build) }, gate);
}

export function pgliteClientOf(database: Database): PGlite {
  const client = (database as unknown as { client?: PGlite }).client;
  if (!client) throw new Error("not a PGlite database");
  return client;
}

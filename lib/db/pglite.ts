import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { drizzle } from "drizzle-orm/pglite";
import * as schema from "./schema";
import { batchInTransaction, type Database, type Db, loggerFrom, type QueryHook } from "./types";

export interface PgliteOptions {
  /** A directory, or `memory://` for an in-memory database. */
  dir?: string;
  /** Start from a dumped data directory (tests clone a migrated template this way). */
  loadDataDir?: Blob | File;
  onQuery?: QueryHook;
}

/**
 * The embedded database: real Postgres 18 with pgvector, in-process. On disk it is guarded by a
 * lock file holding our pid; a lock left by a killed process (and PGlite's own stale
 * postmaster.pid) is cleared on start, while a live owner makes start fail loudly.
 */
export async function createPgliteDatabase(options: PgliteOptions = {}): Promise<Database> {
  const dir = options.dir ?? "memory://";
  const onDisk = !dir.startsWith("memory://");
  let releaseLock = () => {};
  if (onDisk) releaseLock = acquireDirLock(dir);
  const client = await PGlite.create({
    ...(onDisk ? { dataDir: dir } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    extensions: { vector },
  });
  // PGlite is one session that does not apply database-level settings (ALTER DATABASE ... SET
  // in migrations 0003 and 0007), so the settings vector searches rely on are set here.
  await client.exec("SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = 200");
  const db = drizzle({ client, schema, logger: loggerFrom(options.onQuery) }) as unknown as Db;
  return {
    db,
    kind: "pglite",
    batch: (build) => batchInTransaction(db, build),
    close: async () => {
      await client.close();
      releaseLock();
    },
    // Exposed for tests that dump a migrated template.
    ...({ client } as object),
  };
}

export function pgliteClientOf(database: Database): PGlite {
  const client = (database as unknown as { client?: PGlite }).client;
  if (!client) throw new Error("not a PGlite database");
  return client;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function acquireDirLock(dir: string): () => void {
  const lockFile = `${dir.replace(/\/+$/, "")}.lock`;
  mkdirSync(dirname(lockFile), { recursive: true });
  if (existsSync(lockFile)) {
    const owner = Number(readFileSync(lockFile, "utf8").trim());
    if (owner && owner !== process.pid && isAlive(owner)) {
      throw new Error(`The embedded database at ${dir} is in use by process ${owner}`);
    }
  }
  // Nobody else owns the directory: a postmaster.pid left behind by a killed process would
  // make PGlite refuse to open it.
  rmSync(join(dir, "postmaster.pid"), { force: true });
  writeFileSync(lockFile, String(process.pid));
  return () => rmSync(lockFile, { force: true });
}

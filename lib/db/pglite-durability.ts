import { closeSync, fsyncSync, openSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { NodeFS } from "@electric-sql/pglite/nodefs";

/**
 * How the embedded database on disk treats commits.
 * - `full` (default): a commit is on disk before it is acknowledged, as Postgres promises.
 * - `fast`: PGlite's own defaults (fsync off). A process crash loses nothing (every write has
 *   reached the operating system), but an OS crash or power loss loses what the OS had not yet
 *   written back (on Linux up to ~30 s of writes) and can leave the cluster unrecoverable.
 */
export type PgliteDurability = "full" | "fast";

/**
 * PGlite's start parameters for a durability mode. PGlite starts Postgres with `-F` (fsync off);
 * durable mode drops it and has the write-ahead log flushed with fsync(), the one sync call that
 * reaches the host through the hook below (PGlite answers fdatasync, Postgres's default
 * wal_sync_method on Linux, with success and no host call).
 */
export function pgliteStartParams(durability: PgliteDurability, defaults: readonly string[]): string[] {
  if (durability === "fast") return [...defaults];
  return [...defaults.filter((p) => p !== "-F"), "-c", "fsync=on", "-c", "wal_sync_method=fsync"];
}

/** PGlite's own default start parameters (a static of the class, not in its type declarations). */
export const PGLITE_DEFAULT_START_PARAMS: readonly string[] = (PGlite as unknown as { defaultStartParams: string[] })
  .defaultStartParams;

interface EmscriptenStream {
  nfd?: number;
  node: unknown;
}
interface EmscriptenNodefs {
  stream_ops: { fsync?: (stream: EmscriptenStream) => number };
  realPath(node: unknown): string;
  tryFSOperation<T>(operation: () => T): T;
}
interface EmscriptenModule {
  FS: { filesystems: { NODEFS: EmscriptenNodefs } };
}

/** Counts of host sync calls made for Postgres, for tests and benchmarks. */
export interface SyncCounter {
  syncs: number;
}

/**
 * PGlite's Node file system passes every write straight to the host file, but its emscripten
 * NODEFS has no fsync: Postgres's fsync() of a file returns success without any host call
 * (electric-sql/pglite#1107). This file system installs one before Postgres starts, so every
 * fsync Postgres makes (the WAL at each commit, data files at checkpoints, directories after a
 * rename) syncs the host descriptor. A failed host sync surfaces to Postgres as the error it is
 * (EIO and the like), which it treats as a PANIC rather than pretending the data is safe.
 */
export class DurableNodeFS extends NodeFS {
  constructor(
    dataDir: string,
    private readonly counter: SyncCounter = { syncs: 0 },
  ) {
    super(dataDir);
  }

  override async init(pg: PGlite, opts: Parameters<NodeFS["init"]>[1]) {
    const { emscriptenOpts } = await super.init(pg, opts);
    const counter = this.counter;
    const installFsync = (mod: EmscriptenModule) => {
      const nodefs = mod.FS.filesystems.NODEFS;
      nodefs.stream_ops.fsync = (stream) =>
        nodefs.tryFSOperation(() => {
          counter.syncs++;
          // A regular file has its host descriptor; a directory stream may have none.
          if (typeof stream.nfd === "number") fsyncSync(stream.nfd);
          else syncPath(nodefs.realPath(stream.node));
          return 0;
        });
    };
    return { emscriptenOpts: { ...emscriptenOpts, preRun: [...(emscriptenOpts.preRun ?? []), installFsync] } };
  }
}

function syncPath(path: string) {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * fsync every file and directory under `dir`: a cluster just made by initdb (which runs without
 * our hook) is on disk before the first write is acknowledged. Runs once, when the directory is new.
 */
export function syncTree(dir: string): number {
  let synced = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) synced += syncTree(path);
    else if (entry.isFile()) {
      syncPath(path);
      synced++;
    }
  }
  syncPath(dir);
  return synced + 1;
}

import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/** A process as /proc shows it: its state letter and its start time (clock ticks since boot). */
export interface ProcessInfo {
  state: string;
  startTime: string;
}

/** The holder a lock file names: a pid, and (since this format) the holder's start time. */
export interface LockHolder {
  pid: number;
  startTime?: string;
}

export function parseLockFile(content: string): LockHolder | null {
  const [pid, startTime] = content.trim().split(/\s+/);
  const n = Number(pid);
  if (!Number.isSafeInteger(n) || n <= 0) return null;
  return { pid: n, ...(startTime ? { startTime } : {}) };
}

/**
 * Whether a lock's holder still holds it. A pid with no process, a zombie (killed, not yet reaped
 * by its parent: `kill(pid, 0)` still succeeds for it), a dead process, or a pid reused by a
 * process that started at another time does not. `info` is undefined where the process does not
 * exist, null where /proc cannot tell (not Linux): then the pid's existence decides.
 */
export function holderIsAlive(holder: LockHolder, info: ProcessInfo | null | undefined, pidExists: boolean): boolean {
  if (info === undefined) return false;
  if (info === null) return pidExists;
  if (info.state === "Z" || info.state === "X" || info.state === "x") return false;
  if (holder.startTime !== undefined && holder.startTime !== info.startTime) return false;
  return true;
}

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses). */
export function parseProcStat(stat: string): ProcessInfo | null {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Field 3 is the state; field 22 (starttime) is the 20th after the command name.
  const [state, startTime] = [fields[0], fields[19]];
  return state && startTime ? { state, startTime } : null;
}

function processInfo(pid: number): ProcessInfo | null | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ESRCH") return pidExists(pid) ? null : undefined;
    return null;
  }
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The directory's lock is held by a live process (`pid`, when the lock file names it). */
export class DirectoryInUseError extends Error {
  constructor(
    message: string,
    readonly dir: string,
    readonly pid?: number,
  ) {
    super(message);
    this.name = "DirectoryInUseError";
  }
}

/**
 * One process per embedded data directory: a lock file beside it names the holder. It is created
 * exclusively (two processes starting together cannot both win); a lock whose holder is dead, a
 * zombie or a reused pid is stale and taken over; a live holder makes start fail loudly.
 */
export function acquireDirLock(dir: string): () => void {
  const lockFile = `${dir.replace(/\/+$/, "")}.lock`;
  mkdirSync(dirname(lockFile), { recursive: true });
  const self = processInfo(process.pid);
  const content = self ? `${process.pid} ${self.startTime}` : String(process.pid);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(lockFile, "wx");
      try {
        writeSync(fd, content);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      return () => rmSync(lockFile, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    let existing = "";
    try {
      existing = readFileSync(lockFile, "utf8");
    } catch {
      continue; // removed meanwhile: try to create it again
    }
    const holder = parseLockFile(existing);
    if (holder && holder.pid !== process.pid) {
      if (holderIsAlive(holder, processInfo(holder.pid), pidExists(holder.pid))) {
        throw new DirectoryInUseError(
          `The embedded database at ${dir} is in use by process ${holder.pid}, another server on the same data directory: stop it, or set PGLITE_DIR to another directory.`,
          dir,
          holder.pid,
        );
      }
    }
    rmSync(lockFile, { force: true }); // stale (or ours, or unreadable): take it over
  }
  throw new DirectoryInUseError(
    `Could not lock the embedded database at ${dir}: another process keeps taking it (set PGLITE_DIR to another directory).`,
    dir,
  );
}

import { readFileSync } from "node:fs";

/**
 * What Linux says about another process's memory and CPU (/proc/<pid>/…), for the server-rss
 * scenario. The parsers are pure so they can be tested on captured text.
 */

/** VmRSS and VmHWM (KiB) from /proc/<pid>/status text. */
export function parseStatus(status: string): { rssKiB: number; hwmKiB: number } {
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rssKiB: field("VmRSS"), hwmKiB: field("VmHWM") };
}

/** User + system CPU time (clock ticks) from /proc/<pid>/stat text (fields 14 and 15). */
export function parseCpuTicks(stat: string): number {
  // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * The resident KiB of a WebAssembly memory in /proc/<pid>/smaps text: V8 reserves a memory's
 * whole address range up front (GiBs, inaccessible) and makes its current size readable and
 * writable at the start, so it shows as a read-write mapping directly followed by a large
 * inaccessible one. Sums every such mapping (the embedded database has one); 0 when none.
 */
export function parseWasmResidentKiB(smaps: string): number {
  const GUARD_BYTES = 2 ** 30;
  const maps: { start: bigint; end: bigint; perms: string; rssKiB: number }[] = [];
  for (const line of smaps.split("\n")) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) (\S{4})/.exec(line);
    if (range) maps.push({ start: BigInt(`0x${range[1]}`), end: BigInt(`0x${range[2]}`), perms: range[3], rssKiB: 0 });
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && maps.length > 0) maps[maps.length - 1].rssKiB = Number(rss[1]);
  }
  let total = 0;
  for (let i = 1; i < maps.length; i++) {
    const [before, guard] = [maps[i - 1], maps[i]];
    const isGuard = guard.perms.startsWith("---") && guard.end - guard.start >= BigInt(GUARD_BYTES);
    if (isGuard && before.end === guard.start && before.perms.startsWith("rw")) total += before.rssKiB;
  }
  return total;
}

const read = (path: string) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined; // the process is gone
  }
};

export function processMemory(pid: number) {
  const status = read(`/proc/${pid}/status`);
  return status === undefined ? undefined : parseStatus(status);
}

export function processCpuTicks(pid: number) {
  const stat = read(`/proc/${pid}/stat`);
  return stat === undefined ? undefined : parseCpuTicks(stat);
}

export function wasmResidentKiB(pid: number) {
  const smaps = read(`/proc/${pid}/smaps`);
  return smaps === undefined ? undefined : parseWasmResidentKiB(smaps);
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on every Linux Node.js runs on). */
export const CLOCK_TICKS_PER_SECOND = 100;

/**
 * Ends this process once the process that started it is gone (its parent id changes: it was
 * re-parented to init or a subreaper), checked every `everyMs` without keeping it alive. A bench
 * unit runs for minutes under run.ts's `spawnSync`: Ctrl-C reaches the whole process group, but
 * `kill` of run.ts alone (a timeout, a script) left the unit running, holding a core and its
 * database for the rest of its scenario.
 */
export function exitWithParent(everyMs = 1000): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.exit(1);
  }, everyMs).unref();
}

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseCpuTicks, parseStatus, parseWasmResidentKiB } from "./proc";

describe("/proc readers", () => {
  it("reads VmRSS and VmHWM from status", () => {
    const status = "Name:\tnode\nVmPeak:\t 9999 kB\nVmHWM:\t  974456 kB\nVmRSS:\t  711768 kB\nThreads:\t12\n";
    expect(parseStatus(status)).toEqual({ rssKiB: 711_768, hwmKiB: 974_456 });
  });

  it("adds user and system ticks from stat, whatever the command name holds", () => {
    const stat = "29012 (node (a) b) R 28939 28922 19790 0 -1 4194560 967507 0 0 0 32068 1743 0 0 25 5 12 0";
    expect(parseCpuTicks(stat)).toBe(32_068 + 1_743);
  });

  it("finds the resident part of a WebAssembly memory: a read-write mapping followed by its reserved guard", () => {
    const smaps = [
      "00400000-00500000 r-xp 00000000 fd:00 1 /usr/bin/node",
      "Rss:                 512 kB",
      // the memory: 153 MiB readable, then the rest of its 10 GiB reservation
      "7f0000000000-7f0009900000 rw-p 00000000 00:00 0",
      "Rss:              130048 kB",
      "7f0009900000-7f0280000000 ---p 00000000 00:00 0",
      "Rss:                   0 kB",
      // a read-write mapping not followed by a guard is not a WebAssembly memory
      "7f0300000000-7f0300100000 rw-p 00000000 00:00 0",
      "Rss:                1024 kB",
      "7f0400000000-7f0500000000 ---p 00000000 00:00 0",
      "Rss:                   0 kB",
    ].join("\n");
    expect(parseWasmResidentKiB(smaps)).toBe(130_048);
    expect(parseWasmResidentKiB(smaps.split("\n").slice(0, 2).join("\n"))).toBe(0);
  });
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("exitWithParent", () => {
  it("ends a process once the process that started it is killed, not before", async () => {
    // A parent (as run.ts) that starts a unit (as child.ts) calling exitWithParent, then is killed
    // alone, not its process group.
    const dir = mkdtempSync(join(tmpdir(), "exit-with-parent-"));
    let unitPid: number | undefined;
    try {
      const unit = join(dir, "unit.ts");
      const proc = fileURLToPath(new URL("./proc.ts", import.meta.url));
      writeFileSync(
        unit,
        `import { exitWithParent } from ${JSON.stringify(proc)};\nexitWithParent(50);\nconsole.log(process.pid);\nsetInterval(() => {}, 1000);\n`,
      );
      const parent = spawn(
        process.execPath,
        [
          "-e",
          `const c = require("node:child_process").spawn(process.execPath, ["--import", "tsx", ${JSON.stringify(unit)}], { stdio: ["ignore", "inherit", "inherit"] }); setInterval(() => {}, 1000);`,
        ],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      unitPid = await new Promise<number>((resolve, reject) => {
        parent.stdout.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
        parent.once("exit", (code) => reject(new Error(`the parent exited (${code}) first`)));
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(alive(unitPid)).toBe(true);
      parent.kill("SIGKILL");
      const deadline = Date.now() + 5000;
      while (alive(unitPid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      expect(alive(unitPid)).toBe(false);
    } finally {
      if (unitPid !== undefined && alive(unitPid)) process.kill(unitPid, "SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);
});

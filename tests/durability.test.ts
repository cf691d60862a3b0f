import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { createPgliteDatabase } from "../lib/db/pglite";
import type { SyncCounter } from "../lib/db/pglite-durability";
import { callJson, provisionApiKey } from "./helpers/http-tenant";
import { startServerProcess } from "./helpers/process";

/**
 * An acknowledged write is on disk: proved from outside the process. The Node.js host runs under
 * strace, which logs every fsync/fdatasync system call the process makes; the calls made while N
 * messages are acknowledged are counted. Durable (the default): at least one sync of the
 * write-ahead log per acknowledged write. PGLITE_DURABILITY=fast: none.
 *
 * strace is a Debian package (.ci/run installs it). Without it this file is skipped with a
 * warning, except in CI (CI set), where it fails.
 */
const dir = mkdtempSync(join(tmpdir(), "memsvc-durability-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function hasStrace() {
  try {
    execFileSync("strace", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
const inCi = !!process.env.CI && process.env.CI !== "false" && process.env.CI !== "0";
const strace = hasStrace();
if (!strace && !inCi) console.warn("!! strace not found: the durability proof is skipped (apt-get install strace)");

const WRITES = 40;

/** Sync system calls logged so far, and how many of them hit the write-ahead log. */
function syncCalls(traceFile: string) {
  const lines = existsSync(traceFile) ? readFileSync(traceFile, "utf8").split("\n") : [];
  const syncs = lines.filter((l) => /\b(fsync|fdatasync)\(/.test(l) && !l.includes("resumed>"));
  return { all: syncs.length, wal: syncs.filter((l) => l.includes("/pg_wal/")).length };
}

async function acknowledgedWritesUnderStrace(durability: "full" | "fast") {
  const traceFile = join(dir, `trace-${durability}.txt`);
  const server = await startServerProcess(
    { PGLITE_DIR: join(dir, `db-${durability}`), PGLITE_DURABILITY: durability, ADMIN_PASSWORD: "durable-pass" },
    60_000,
    // -f: every thread; -y: the path behind each descriptor.
    ["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o", traceFile],
  );
  try {
    const key = await provisionApiKey(server.url, "durable-pass", durability);
    const thread = await callJson(server.url, "/v1/threads", { token: key, body: { dataset: "d" } });
    const threadId = thread.body.threadId as string;
    const before = syncCalls(traceFile);
    for (let i = 0; i < WRITES; i++) {
      const res = await callJson(server.url, `/v1/memory/working/threads/${threadId}/messages`, {
        token: key,
        body: { role: "user", content: `message ${i}` },
      });
      expect(res.status).toBe(201);
    }
    const after = syncCalls(traceFile);
    return { all: after.all - before.all, wal: after.wal - before.wal };
  } finally {
    // strace's child is the server: stop it, and strace ends with it.
    const tracer = server.child.pid;
    const [pid] = readFileSync(`/proc/${tracer}/task/${tracer}/children`, "utf8").trim().split(" ");
    if (pid) process.kill(Number(pid), "SIGTERM");
    await server.exited;
  }
}

describe.runIf(strace || inCi)("durable commits, seen from outside the process", { timeout: 120_000 }, () => {
  it("strace is installed (CI installs it)", () => {
    expect(strace, "strace not found: apt-get install strace").toBe(true);
  });

  it("durable by default: every acknowledged write made a write-ahead-log fsync reach the kernel", async () => {
    const syncs = await acknowledgedWritesUnderStrace("full");
    expect(syncs.wal).toBeGreaterThanOrEqual(WRITES);
    // Two commits per add-message today (the key's lastUsedAt stamp, then the write): not many more.
    expect(syncs.all).toBeLessThanOrEqual(3 * WRITES);
  });

  it("PGLITE_DURABILITY=fast makes no sync call at all while acknowledging writes", async () => {
    const syncs = await acknowledgedWritesUnderStrace("fast");
    expect(syncs.all).toBe(0);
  });
});

describe("the embedded database's host sync hook", { timeout: 60_000 }, () => {
  const commitsAndSyncs = async (durability: "full" | "fast") => {
    const database = await createPgliteDatabase({ dir: join(dir, `hook-${durability}`), durability });
    const counter = (database as unknown as { syncs: SyncCounter }).syncs;
    try {
      await database.db.execute(sql`CREATE TABLE t (v int)`);
      const before = counter.syncs;
      for (let i = 0; i < 10; i++) await database.db.execute(sql`INSERT INTO t VALUES (${i})`);
      return counter.syncs - before;
    } finally {
      await database.close();
    }
  };

  it("syncs the host file once per commit when durable, never when fast", async () => {
    expect(await commitsAndSyncs("full")).toBe(10);
    expect(await commitsAndSyncs("fast")).toBe(0);
  });
});

import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPgliteDatabase } from "../../lib/db/pglite";
import type { SyncCounter } from "../../lib/db/pglite-durability";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { callJson, provisionApiKey } from "../helpers/http-tenant";
import { startServerProcess } from "../helpers/process";
import { migratedPgliteEnv } from "../helpers/test-database";

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

/**
 * From strace's log, in order: the sync calls (all, and those of a write-ahead-log file), and how
 * many `201` answers were written to a socket with no WAL fsync since the answer before them.
 */
function readTrace(traceFile: string) {
  const lines = existsSync(traceFile) ? readFileSync(traceFile, "utf8").split("\n") : [];
  let all = 0;
  let wal = 0;
  let created = 0;
  let createdUnsynced = 0;
  let walSinceAnswer = 0;
  for (const line of lines) {
    if (line.includes("resumed>")) continue;
    if (/\b(fsync|fdatasync)\(/.test(line)) {
      all++;
      if (line.includes("/pg_wal/")) {
        wal++;
        walSinceAnswer++;
      }
    } else if (/\bwritev?\(\d+<(TCP|TCPv6|socket)/.test(line) && line.includes("HTTP/1.1 ")) {
      if (line.includes("HTTP/1.1 201")) {
        created++;
        if (walSinceAnswer === 0) createdUnsynced++;
      }
      walSinceAnswer = 0;
    }
  }
  return { all, wal, created, createdUnsynced };
}

const RECALLS = 10;

async function acknowledgedWritesUnderStrace(durability: "full" | "fast", fake: FakeOpenAI) {
  const traceFile = join(dir, `trace-${durability}.txt`);
  const server = await startServerProcess(
    {
      ...migratedPgliteEnv(join(dir, `db-${durability}`)),
      PGLITE_DURABILITY: durability,
      ADMIN_PASSWORD: "durable-pass",
      OPENAI_API_KEY: "test",
      OPENAI_BASE_URL: fake.url,
    },
    60_000,
    // -f: every thread; -y: the path (or socket) behind each descriptor; -s: enough of each
    // buffer written to read the HTTP status line.
    ["strace", "-f", "-y", "-qq", "-s", "16", "-e", "trace=fsync,fdatasync,write,writev", "-o", traceFile],
  );
  try {
    const key = await provisionApiKey(server.url, "durable-pass", durability);
    const thread = await callJson(server.url, "/v1/threads", { token: key, body: { dataset: "d" } });
    const threadId = thread.body.threadId as string;
    const before = readTrace(traceFile);
    // The assistant's messages (not indexed by default) arm no embedding job: its runs, retried
    // here without a provider, would commit (and sync) whenever a slow machine lets them fall
    // into the reads below. They run the statement a user's message runs, without its index row.
    for (let i = 0; i < WRITES; i++) {
      const res = await callJson(server.url, `/v1/memory/working/threads/${threadId}/messages`, {
        token: key,
        body: { role: "assistant", content: `message ${i}` },
      });
      expect(res.status).toBe(201);
    }
    const after = readTrace(traceFile);
    // Reads commit nothing that must reach the disk: neither the key's lastUsedAt stamp nor the
    // ledger row of a recall's query embedding (each query new, so each is embedded) waits for it.
    for (let i = 0; i < 10; i++) {
      const res = await callJson(server.url, `/v1/memory/working/threads/${threadId}/messages?limit=5`, { token: key });
      expect(res.status).toBe(200);
    }
    const embeddingsBefore = fake.embeddingCalls().length;
    for (let i = 0; i < RECALLS; i++) {
      const res = await callJson(server.url, "/v1/memory/recall", {
        token: key,
        body: { dataset: "d", query: `where do I live, question ${i}` },
      });
      expect(res.status).toBe(200);
    }
    const afterReads = readTrace(traceFile);
    expect(fake.embeddingCalls().length - embeddingsBefore).toBe(RECALLS);
    // The rows are committed (a statement of their own would be a sync too: read after the trace).
    const usage = await callJson(server.url, "/v1/usage?groupBy=operation", { token: key });
    const groups = usage.body.groups as { key: string; calls: number }[];
    expect(groups.find((g) => g.key === "recall_embedding")?.calls).toBe(RECALLS);
    return {
      all: after.all - before.all,
      wal: after.wal - before.wal,
      created: after.created - before.created,
      createdUnsynced: after.createdUnsynced - before.createdUnsynced,
      duringReads: afterReads.all - after.all,
    };
  } finally {
    // strace's child is the server: stop it, and strace ends with it.
    const tracer = server.child.pid;
    const [pid] = readFileSync(`/proc/${tracer}/task/${tracer}/children`, "utf8").trim().split(" ");
    if (pid) process.kill(Number(pid), "SIGTERM");
    await server.exited;
  }
}

describe.runIf(strace || inCi)("durable commits, seen from outside the process", { timeout: 120_000 }, () => {
  let fake: FakeOpenAI;
  beforeAll(async () => {
    fake = await startFakeOpenAI();
  });
  afterAll(() => fake.close());

  it("strace is installed (CI installs it)", () => {
    expect(strace, "strace not found: apt-get install strace").toBe(true);
  });

  it("durable by default: every 201 is sent after a write-ahead-log fsync reached the kernel", async () => {
    const syncs = await acknowledgedWritesUnderStrace("full", fake);
    expect(syncs.wal).toBeGreaterThanOrEqual(WRITES);
    // Each 201 left the process after a WAL fsync made since the answer before it.
    expect(syncs.created).toBe(WRITES);
    expect(syncs.createdUnsynced).toBe(0);
    // One per write: the key's lastUsedAt stamp commits without a flush of its own.
    expect(syncs.all).toBeLessThanOrEqual(WRITES + 5);
    expect(syncs.duringReads).toBe(0);
  });

  it("PGLITE_DURABILITY=fast makes no sync call at all while acknowledging writes", async () => {
    const syncs = await acknowledgedWritesUnderStrace("fast", fake);
    expect(syncs.all).toBe(0);
    expect(syncs.created).toBe(WRITES);
    expect(syncs.createdUnsynced).toBe(WRITES);
  });
});

describe("the embedded database's host sync hook", { timeout: 60_000 }, () => {
  const commitsAndSyncs = async (durability: "full" | "fast") => {
    const { PGLITE_DIR } = migratedPgliteEnv(join(dir, `hook-${durability}`));
    const database = await createPgliteDatabase({ dir: PGLITE_DIR, durability });
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

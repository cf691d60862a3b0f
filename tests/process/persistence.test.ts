import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { npmStartArgs } from "../../dev/start-command";
import { freePort, startServerProcess } from "../helpers/process";
import { migratedPgliteEnv } from "../helpers/test-database";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The Node.js host on an on-disk embedded database keeps every acknowledged message through
 * `kill -9`: the process is killed while appends are in flight, restarted on the same directory,
 * and every message it answered 201 for is there, once, with gapless sequence numbers.
 */
const dir = mkdtempSync(join(tmpdir(), "memsvc-persist-"));
const env = { ...migratedPgliteEnv(join(dir, "pglite")), ADMIN_PASSWORD: "", OPENAI_API_KEY: "" };
const pgliteDir = env.PGLITE_DIR;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function json(res: Response) {
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body };
}

// Two server processes start and stop in this file; under a full parallel suite that takes a while.
describe("embedded database on disk", { timeout: 120_000 }, () => {
  it("keeps every acknowledged message through kill -9 and restarts on a stale lock", async () => {
    const first = await startServerProcess(env);
    // No ADMIN_PASSWORD: one is generated and printed once, on its own line.
    const password = first.output().match(/^Admin password: (\S+)$/m)?.[1];
    expect(password).toBeTruthy();
    const post = (url: string, token: string, body: unknown) =>
      fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const login = await json(
      await fetch(`${first.url}/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username: "admin", password }),
      }),
    );
    const session = login.body.token as string;
    const project = await json(await post(`${first.url}/dashboard/projects`, session, { name: "durable" }));
    const projectId = (project.body.project as { id: string }).id;
    const key = (await json(await post(`${first.url}/dashboard/api-keys`, session, { name: "k", projectId }))).body
      .key as string;
    const threadId = (await json(await post(`${first.url}/v1/threads`, key, { dataset: "d" }))).body.threadId as string;

    // Four writers append until the process dies under them.
    const acknowledged = new Map<string, number>();
    let killed = false;
    const writer = async (w: number) => {
      for (let i = 0; !killed; i++) {
        try {
          const res = await post(`${first.url}/v1/memory/working/threads/${threadId}/messages`, key, {
            role: "user",
            content: `writer ${w} message ${i}`,
          });
          if (res.status === 201) {
            const body = (await res.json()) as { messageId: string; sequenceNumber: number };
            acknowledged.set(body.messageId, body.sequenceNumber);
          }
        } catch {
          return; // connection refused or reset: the process is gone
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    while (acknowledged.size < 60) await new Promise((r) => setTimeout(r, 10));
    first.child.kill("SIGKILL");
    killed = true;
    await first.exited;
    await Promise.all(writers);
    expect(existsSync(`${pgliteDir}.lock`)).toBe(true); // left behind by the killed process

    const second = await startServerProcess(env);
    try {
      expect(second.output()).not.toContain("Admin password: "); // not an empty database
      const stored = new Map<string, number>();
      let before: number | undefined;
      for (;;) {
        const q = before ? `?limit=100&before=${before}` : "?limit=100";
        const page = await fetch(`${second.url}/v1/memory/working/threads/${threadId}/messages${q}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        expect(page.status).toBe(200);
        const body = (await page.json()) as {
          messages: { messageId: string; sequenceNumber: number }[];
          hasMore: boolean;
        };
        for (const m of body.messages) stored.set(m.messageId, m.sequenceNumber);
        if (!body.hasMore) break;
        before = Math.min(...body.messages.map((m) => m.sequenceNumber));
      }
      for (const [id, seq] of acknowledged) expect(stored.get(id)).toBe(seq);
      const seqs = [...stored.values()].sort((a, b) => a - b);
      expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });

  it("restarts at the first try when the killed holder is a zombie not yet reaped", async () => {
    const zombieDir = migratedPgliteEnv(join(dir, "zombie")).PGLITE_DIR;
    // The server runs as the child of a process that never reaps its children (sh exec'd into
    // sleep), so once killed it stays a zombie, which kill(pid, 0) still reports as existing.
    const port = await freePort();
    const parent = spawn(
      "sh",
      ["-c", `"${process.execPath}" ${npmStartArgs().join(" ")} & echo "server pid $!"; exec sleep 120`],
      {
        cwd: ROOT,
        env: { ...process.env, ...env, PGLITE_DIR: zombieDir, PORT: String(port) },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    parent.stdout.on("data", (d) => {
      out += d;
    });
    parent.stderr.on("data", (d) => {
      out += d;
    });
    try {
      for (let i = 0; i < 600 && !out.includes("Listening on"); i++) await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain("Listening on");
      const pid = Number(out.match(/server pid (\d+)/)?.[1]);
      process.kill(pid, "SIGKILL");
      let state = "";
      for (let i = 0; i < 100 && state !== "Z"; i++) {
        await new Promise((r) => setTimeout(r, 20));
        state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[0];
      }
      expect(state).toBe("Z");
      expect(readFileSync(`${zombieDir}.lock`, "utf8")).toMatch(new RegExp(`^${pid}\\b`));

      const restarted = await startServerProcess({ ...env, PGLITE_DIR: zombieDir });
      restarted.child.kill("SIGTERM");
      await restarted.exited;
    } finally {
      parent.kill("SIGKILL");
    }
  });

  it("refuses to open a directory another live process holds", async () => {
    const busyDir = join(dir, "busy");
    // Our own test process is alive: a lock naming it must stop the server from starting.
    writeFileSync(`${busyDir}.lock`, String(process.pid));
    await expect(startServerProcess({ ...env, PGLITE_DIR: busyDir })).rejects.toThrow(
      new RegExp(`in use by process ${process.pid}`),
    );
  });
});

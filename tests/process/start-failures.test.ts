import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../dev/start-command";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { freePort, runServerToExit, runToExit } from "../helpers/process";
import { migratedPgliteEnv } from "../helpers/test-database";

/**
 * `npm start` refusing to start for a reason the operator fixes: exit code 1 and one plain
 * sentence on stderr saying what to set, no JSON log line and no stack trace.
 */
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "memsvc-start-failures-"));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const base = { ADMIN_PASSWORD: "admin-password", OPENAI_API_KEY: "", OPENAI_BASE_URL: "", LOG_LEVEL: "error" };

/** The one line the process printed on stderr; stdout empty. */
function oneSentence(result: { code: number | null; stdout: string; stderr: string }) {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe("");
  const lines = result.stderr.trim().split("\n");
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).not.toMatch(/^\{|\bat .*:\d+:\d+/);
  return lines[0];
}

describe("npm start, refusing to start", () => {
  it("the port in use: names the port and PORT", async () => {
    const port = await freePort();
    const holder: Server = createServer();
    await new Promise<void>((resolve) => holder.listen(port, "127.0.0.1", resolve));
    try {
      // The whole start (database, migrations) runs before the port is bound: on a migrated copy, it is quicker.
      const result = await runServerToExit(
        { ...base, ...migratedPgliteEnv(join(dir, "port")), PORT: String(port) },
        100_000,
      );
      expect(oneSentence(result)).toBe(
        `Port ${port} is already in use (another server, or a second \`npm start\`?): stop it, or set PORT to a free port.`,
      );
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  }, 120_000);

  it("invalid configuration: names each variable, not its value", async () => {
    const result = await runServerToExit({
      ...base,
      PORT: "eighty",
      PGLITE_DURABILITY: "sometimes",
      PGLITE_DIR: join(dir, "config"),
    });
    const line = oneSentence(result);
    expect(line).toMatch(/^Invalid configuration: PORT: .*; PGLITE_DURABILITY: .*unset it for its default\)\.$/);
    expect(line).not.toMatch(/eighty|sometimes/);
  });

  it("a second server on the same data directory: names the holder and PGLITE_DIR", async () => {
    const busyDir = join(dir, "busy");
    // This test process is alive: a lock naming it is what a running server leaves.
    writeFileSync(`${busyDir}.lock`, String(process.pid));
    const result = await runServerToExit({ ...base, PORT: String(await freePort()), PGLITE_DIR: busyDir });
    expect(oneSentence(result)).toBe(
      `The embedded database at ${busyDir} is in use by process ${process.pid}, another server on the same data directory: stop it, or set PGLITE_DIR to another directory.`,
    );
  });

  it("a database it cannot open: names it (never the URL's password) and what to check", async () => {
    const closed = await freePort();
    const url = `postgres://memory:hunter2@127.0.0.1:${closed}/nope`;
    const result = await runServerToExit({ ...base, PORT: String(await freePort()), DATABASE_URL: url });
    const line = oneSentence(result);
    expect(line).toMatch(
      new RegExp(
        `^Cannot open the database at DATABASE_URL \\(127\\.0\\.0\\.1:${closed}/nope\\): .*ECONNREFUSED.*; check that the server is running`,
      ),
    );
    expect(line).not.toContain("hunter2");
    const unwritable = await runServerToExit({ ...base, PORT: String(await freePort()), PGLITE_DIR: "/proc/nope" });
    expect(oneSentence(unwritable)).toMatch(
      /^Cannot open the embedded database at \/proc\/nope: .*; check that PGLITE_DIR names a directory this process can write, in a directory it can write too \(the lock file \/proc\/nope\.lock goes beside it\)\.$/,
    );
  });
});

describe("npm run db:migrate, refusing to migrate", () => {
  const migrate = (env: Record<string, string>) =>
    runToExit(process.execPath, ["--import", "tsx", "scripts/migrate.ts"], {
      cwd: REPO_ROOT,
      env: { ...base, ...env },
    });

  it("says what to set in one sentence, no error log line and no stack", async () => {
    const tooBig = await migrate({ PGLITE_DIR: join(dir, "too-big"), EMBEDDING_DIMENSIONS: "5000" });
    expect(tooBig.code, tooBig.output).toBe(1);
    expect(tooBig.output).toContain("Invalid configuration: EMBEDDING_DIMENSIONS: too big");

    // Migrated already, with the tests' vector size (a first migration runs in the quick start and the command line's suite).
    const migrated = migratedPgliteEnv(join(dir, "migrated"));
    expect((await migrate(migrated)).code).toBe(0);
    const other = await migrate({ ...migrated, EMBEDDING_DIMENSIONS: String(2 * TEST_EMBEDDING_DIMENSIONS) });
    expect(other.code, other.output).toBe(1);
    expect(other.output).toContain(`EMBEDDING_DIMENSIONS is ${2 * TEST_EMBEDDING_DIMENSIONS}`);
    expect(other.output).toContain(`Set EMBEDDING_DIMENSIONS=${TEST_EMBEDDING_DIMENSIONS}`);
    const unreachable = await migrate({ DATABASE_URL: `postgres://127.0.0.1:${await freePort()}/db` });
    expect(unreachable.code, unreachable.output).toBe(1);
    expect(unreachable.output).toContain("Cannot open the database at DATABASE_URL");
    for (const { output } of [tooBig, other, unreachable]) {
      expect(output).not.toMatch(/"level":"error"|\bat .*:\d+:\d+/);
    }
  }, 120_000);
});

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { bundled } from "../../bin/bundle.mjs";
import { REPO_ROOT } from "../../dev/start-command";
import { startServerProcess } from "../helpers/process";
import { migratedPgliteEnv } from "../helpers/test-database";

/**
 * `npm start` runs the server from a bundle (bin/bundle.mjs): built again when a file it was built
 * from changed, and never needed, from a checkout the process cannot write to.
 */
const sources = join(REPO_ROOT, "tests", ".bundle-fixture");
afterAll(() => rmSync(sources, { recursive: true, force: true }));

describe("the server's bundle", () => {
  it("is built again when a source changed, not otherwise; import.meta.url still names the source", async () => {
    mkdirSync(sources, { recursive: true });
    const entry = join(sources, "entry.ts");
    const part = join(sources, "part.ts");
    writeFileSync(
      entry,
      'import { value } from "./part";\nexport { value };\nexport const where: string = import.meta.url;\n',
    );
    writeFileSync(part, "export const value: number = 1;\n");
    const name = `fixture-${process.pid}`;
    const load = async () => {
      const url = await bundled("tests/.bundle-fixture/entry.ts", name);
      const built = statSync(new URL(url)).mtimeMs;
      return { ...((await import(`${url}?at=${built}`)) as { value: number; where: string }), built };
    };
    const first = await load();
    expect(first).toMatchObject({ value: 1, where: pathToFileURL(entry).href });
    expect((await load()).built).toBe(first.built);
    writeFileSync(part, "export const value: number = 2;\n");
    // A clock that did not move between the two writes would hide the edit.
    utimesSync(part, new Date(), new Date(Date.now() + 5_000));
    const second = await load();
    expect(second.value).toBe(2);
    expect(second.built).not.toBe(first.built);
    rmSync(join(REPO_ROOT, "dist", "node", `${name}.mjs`));
    rmSync(join(REPO_ROOT, "dist", "node", `${name}.mjs.map`));
    rmSync(join(REPO_ROOT, "dist", "node", `${name}.mjs.inputs.json`));
  });

  it("is built once by processes starting at once, the others waiting for it; a lock its process left is taken over", async () => {
    mkdirSync(sources, { recursive: true });
    writeFileSync(join(sources, "shared.ts"), "export const shared: number = 3;\n");
    const name = `fixture-shared-${process.pid}`;
    const out = join(REPO_ROOT, "dist", "node", `${name}.mjs`);
    // A process that imports the builder, loads the bundle and says whether it built it.
    const script = `
      const { bundled } = await import(${JSON.stringify(pathToFileURL(join(REPO_ROOT, "bin", "bundle.mjs")).href)});
      let built = false;
      const url = await bundled("tests/.bundle-fixture/shared.ts", ${JSON.stringify(name)}, () => { built = true; });
      const { shared } = await import(url);
      console.log(JSON.stringify({ built, shared }));`;
    const start = () =>
      new Promise<{ built: boolean; shared: number }>((resolve, reject) => {
        const child = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: REPO_ROOT });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d) => {
          stdout += d;
        });
        child.stderr.on("data", (d) => {
          stderr += d;
        });
        child.once("close", (code) => (code === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(stderr))));
      });
    try {
      const runs = await Promise.all(Array.from({ length: 4 }, start));
      expect(runs.filter((r) => r.built)).toHaveLength(1);
      expect(runs.map((r) => r.shared)).toEqual([3, 3, 3, 3]);
      expect(existsSync(`${out}.lock`)).toBe(false);
      // A build whose process died left its lock: the next start takes it over and builds.
      const gone = spawnSync(process.execPath, ["-e", ""]).pid;
      writeFileSync(`${out}.lock`, String(gone));
      utimesSync(join(sources, "shared.ts"), new Date(), new Date(Date.now() + 5_000));
      expect(await start()).toEqual({ built: true, shared: 3 });
      expect(existsSync(`${out}.lock`)).toBe(false);
    } finally {
      for (const suffix of ["", ".map", ".inputs.json", ".lock"]) rmSync(`${out}${suffix}`, { force: true });
    }
  });

  // Permissions bind only a process that is not root: the test runs the server as nobody.
  it.skipIf(process.getuid?.() !== 0)(
    "starts from the sources when it cannot write the bundle, saying so",
    { timeout: 120_000 },
    async () => {
      const data = mkdtempSync(join(tmpdir(), "memsvc-bundle-"));
      chmodSync(data, 0o777);
      // The bundle goes stale (a start builds it again) when a file it was built from changes.
      const builder = join(REPO_ROOT, "bin", "bundle.mjs");
      utimesSync(builder, new Date(), new Date());
      // A migrated data directory, the server's user's own.
      const database = migratedPgliteEnv(join(data, "db"));
      execFileSync("chown", ["-R", "65534:65534", database.PGLITE_DIR]);
      const server = await startServerProcess({ ADMIN_PASSWORD: "admin-password", ...database, HOME: data }, 100_000, [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
      ]);
      try {
        expect((await fetch(`${server.url}/health`)).status).toBe(200);
        expect(server.output()).toMatch(/Cannot write the bundle \(EACCES: [^)]*\): starting from the sources/);
      } finally {
        server.child.kill("SIGTERM");
        await server.exited;
        rmSync(data, { recursive: true, force: true });
      }
    },
  );
});

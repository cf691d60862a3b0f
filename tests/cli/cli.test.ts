import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative as pathRelative } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../dev/start-command";
import { createPgliteDatabase } from "../../lib/db/pglite";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { startServerProcess } from "../helpers/process";
import { migratedPgliteEnv } from "../helpers/test-database";

/**
 * `memory-admin` (bin/memory-admin.mjs) as a child process: on the embedded database in a data
 * directory of its own or, when the environment names a server (TEST_PG_URL or TEST_DATABASE_URL,
 * as under `npm run test:pg`), on that PostgreSQL server through node-postgres instead, as every
 * other suite switches. `npm test` has already run the embedded target and the commands that open no
 * database, so the server run leaves them out. On a server, names are unique per run, as the
 * database outlives the test.
 */
const root = mkdtempSync(join(tmpdir(), "memsvc-cli-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Target {
  name: string;
  embedded: boolean;
  env: Record<string, string>;
}
const pgUrl = process.env.TEST_PG_URL || process.env.TEST_DATABASE_URL;
// The server started on the same database sees it as the command line does: no provider, the tests' vector size.
const common = { EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS), OPENAI_API_KEY: "", OPENAI_BASE_URL: "" };
const targets: Target[] = pgUrl
  ? [{ name: "a PostgreSQL server (node-postgres)", embedded: false, env: { ...common, DATABASE_URL: pgUrl } }]
  : [
      {
        name: "the embedded database",
        embedded: true,
        env: { ...common, PGLITE_DIR: join(root, "pglite"), DATABASE_URL: "" },
      },
    ];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(
  args: string[],
  env: Record<string, string>,
  options: { stdin?: string; command?: string[]; cwd?: string } = {},
) {
  const [command, ...prefix] = options.command ?? [process.execPath, join(REPO_ROOT, "bin/memory-admin.mjs")];
  const child = spawn(command, [...prefix, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: { ...process.env, ...common, LOG_LEVEL: "warn", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  child.stdin.end(options.stdin ?? "");
  return new Promise<Run>((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

/** A run that must succeed; its stdout parsed as JSON. */
async function json<T>(args: string[], env: Record<string, string>, stdin?: string): Promise<T> {
  const run = await cli([...args, "--json"], env, { stdin });
  expect(run, run.stderr).toMatchObject({ code: 0 });
  return JSON.parse(run.stdout) as T;
}

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

interface Project {
  id: string;
  name: string;
  createdAt: string;
}
interface ApiKey {
  id: string;
  name: string;
  keyPreview: string;
  projectId: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}
interface User {
  id: string;
  username: string;
}

describe.skipIf(pgUrl)("memory-admin without a database", { timeout: 120_000 }, () => {
  const env = { PGLITE_DIR: join(root, "untouched"), DATABASE_URL: "" };

  it("answers --help for every command with exit 0", async () => {
    const commands = [
      [],
      ["projects"],
      ["projects", "create"],
      ["projects", "list"],
      ["keys"],
      ["keys", "create"],
      ["keys", "list"],
      ["keys", "revoke"],
      ["users"],
      ["users", "create"],
      ["users", "list"],
      ["users", "reset-password"],
    ];
    const runs = await Promise.all(commands.map((c) => cli([...c, "--help"], env)));
    runs.forEach((run, i) => {
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`Usage: memory-admin${commands[i].map((w) => ` ${w}`).join("")}`);
    });
    expect(runs[5].stdout).toContain("--project <project>");
    expect(runs[11].stdout).toContain("--password-stdin");
    expect(existsSync(env.PGLITE_DIR)).toBe(false);
  });

  it("runs as the package's bin through npx in the checkout", async () => {
    const run = await cli(["keys", "--help"], env, { command: ["npx", "--no", "memory-admin"] });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("Usage: memory-admin keys");
  });

  it("exits 2 on a usage error, naming what is wrong, with nothing on stdout and no database touched", async () => {
    const cases: [string[], RegExp, string?][] = [
      [["projects", "create"], /missing required argument 'name'/],
      [["projects", "create", "   "], /invalid for argument 'name'\. Too small: expected string to have >=1 char/],
      [["projects", "create", "x".repeat(101)], /invalid for argument 'name'\. Too big: .*<=100 char/],
      [["keys", "create"], /required option '-p, --project <project>' not specified/],
      [["users", "create", "bob", "--password", "abc"], /--password must have 6-200 characters \(it has 3\)/],
      // Counted as the server counts them: characters, not UTF-16 units (each emoji is two).
      [["users", "create", "bob", "--password", "😀😀😀"], /--password must have 6-200 characters \(it has 3\)/],
      // An empty (unset) variable or a bare prefix matched every key: with one key, it was revoked.
      [
        ["keys", "revoke", ""],
        /invalid for argument 'key'\. give the key's id \(key_\.\.\.\), the key, or at least the first 7 characters of its preview/,
      ],
      [["keys", "revoke", "mk_"], /invalid for argument 'key'/],
      // An unset variable is not "every project".
      [["keys", "list", "--project", ""], /option '-p, --project <project>' argument '' is invalid/],
      [["keys", "create", "--project", " "], /option '-p, --project <project>' argument ' ' is invalid/],
      [["users", "reset-password", ""], /invalid for argument 'username'/],
      [["users", "reset-password", "bob", "--password-stdin"], /password read from stdin must have 6-200/, "12345\n"],
      [["users", "create", "bob", "--password", "secret1", "--password-stdin"], /not both/, "secret2\n"],
      [["users", "create", "bob", "--password-stdin"], /reads one line/, "one-line\ntwo-lines\n"],
      [["frobnicate"], /unknown command 'frobnicate'/],
      [["projects"], /Usage: memory-admin projects/],
    ];
    const runs = await Promise.all(cases.map(([args, , stdin]) => cli(args, env, { stdin })));
    runs.forEach((run, i) => {
      expect({ args: cases[i][0], code: run.code, stdout: run.stdout }).toEqual({
        args: cases[i][0],
        code: 2,
        stdout: "",
      });
      expect(run.stderr).toMatch(cases[i][1]);
      expect(run.stderr).not.toMatch(/\n\s+at /); // no stack
    });
    expect(existsSync(env.PGLITE_DIR)).toBe(false);
  });

  it("names a bad environment variable (exit 2) and a database it cannot reach (exit 1), never its password", async () => {
    const badEnv = await cli(["projects", "list"], { ...env, PGLITE_DURABILITY: "sometimes" });
    expect(badEnv.code).toBe(2);
    expect(badEnv.stderr).toMatch(/^error: Invalid configuration: PGLITE_DURABILITY: /);
    for (const url of ["notaurl", "postgres://[bad", "mysql://db/memory"]) {
      const badUrl = await cli(["projects", "list"], { DATABASE_URL: url });
      expect({ url, code: badUrl.code }).toEqual({ url, code: 2 });
      expect(badUrl.stderr).toMatch(/^error: Invalid configuration: DATABASE_URL: a postgres:\/\/ URL/);
    }
    const unreachable = await cli(["projects", "list"], { DATABASE_URL: "postgres://svc:hunter22@127.0.0.1:1/memory" });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stdout).toBe("");
    expect(unreachable.stderr).toMatch(
      /^error: Cannot prepare the database at DATABASE_URL \(127\.0\.0\.1:1\/memory\): .*ECONNREFUSED/,
    );
    expect(unreachable.stderr).not.toContain("hunter22");
    expect(unreachable.stderr).not.toMatch(/\n\s+at /);
  });
});

describe.skipIf(pgUrl)("memory-admin when a statement fails in the database", { timeout: 120_000 }, () => {
  it("prints the database's reason, never the statement's parameters (a password's hash)", async () => {
    const env = migratedPgliteEnv(join(root, "failing"));
    // What a role without INSERT on users, a read-only standby or a full disk would answer.
    const database = await createPgliteDatabase({ dir: env.PGLITE_DIR });
    try {
      await database.db.execute(
        sql.raw(`CREATE FUNCTION refuse_users() RETURNS trigger LANGUAGE plpgsql AS
          $$BEGIN RAISE EXCEPTION 'permission denied for table users'; END$$`),
      );
      await database.db.execute(
        sql.raw("CREATE TRIGGER refuse_users BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION refuse_users()"),
      );
    } finally {
      await database.close();
    }
    const run = await cli(["users", "create", "bob", "--password", "secret-password"], env);
    expect(run).toMatchObject({ code: 1, stdout: "" });
    expect(run.stderr).toBe("error: Database error: permission denied for table users\n");
  });
});

describe.each(targets)("memory-admin on $name", { timeout: 240_000 }, (target) => {
  const env = target.env;

  it("creates and lists projects; a new database is migrated first, as the server does", async () => {
    const name = unique("alpha");
    const plain = await cli(["projects", "create", name], env);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^prj_\w+\n$/);
    expect(plain.stderr).toBe(`Created project "${name}".\n`);
    if (target.embedded) expect(existsSync(join(env.PGLITE_DIR, "PG_VERSION"))).toBe(true);

    const { project } = await json<{ project: Project }>(["projects", "create", `  ${name}-b  `], env);
    expect(project).toMatchObject({ id: expect.stringMatching(/^prj_/), name: `${name}-b` });

    const listed = await json<{ projects: Project[]; total: number }>(["projects", "list"], env);
    expect(listed.projects.map((p) => p.id)).toEqual(expect.arrayContaining([plain.stdout.trim(), project.id]));
    expect(listed.total).toBe(listed.projects.length);
    const table = await cli(["projects", "list"], env);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID +NAME +CREATED\n/);
    expect(table.stdout).toMatch(new RegExp(`${project.id} +${name}-b +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\dZ`));

    // Typed in another directory, a relative PGLITE_DIR names the same database as npm start's
    // (npm runs it in the package's directory).
    if (target.embedded) {
      // Deeper than the checkout, so the relative path leads elsewhere from there.
      const outside = mkdtempSync(join(tmpdir(), "memsvc-cli-cwd-"));
      const elsewhere = join(outside, "a", "b", "c", "d");
      mkdirSync(elsewhere, { recursive: true });
      const relative = await json<{ projects: Project[] }>(["projects", "list"], {
        ...env,
        PGLITE_DIR: pathRelative(REPO_ROOT, env.PGLITE_DIR),
      }).catch(() => undefined);
      const fromElsewhere = await cli(
        ["projects", "list", "--json"],
        {
          ...env,
          PGLITE_DIR: pathRelative(REPO_ROOT, env.PGLITE_DIR),
        },
        { cwd: elsewhere },
      );
      rmSync(outside, { recursive: true, force: true });
      expect(fromElsewhere.code, fromElsewhere.stderr).toBe(0);
      expect((JSON.parse(fromElsewhere.stdout) as { projects: Project[] }).projects.map((p) => p.id)).toEqual(
        relative?.projects.map((p) => p.id),
      );
      expect(relative?.projects.map((p) => p.id)).toContain(project.id);
    }

    // A name holding a terminal escape sequence is listed escaped, not obeyed.
    const red = `${name}-\u001b[31mred`;
    expect((await cli(["projects", "create", red], env)).code).toBe(0);
    const escaped = await cli(["projects", "list"], env);
    expect(escaped.stdout).toContain(`${name}-\\u001b[31mred`);
    expect(escaped.stdout).not.toContain("\u001b");
  });

  it("creates API keys (printed once), lists them without the key, revokes by preview, id or key", async () => {
    const name = unique("keys");
    const { project } = await json<{ project: Project }>(["projects", "create", name], env);

    // By the project's name: stdout is the key alone, what a script captures.
    const plain = await cli(["keys", "create", "--project", name, "--name", "ci"], env);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^mk_[0-9a-f]{64}\n$/);
    expect(plain.stderr).toContain("shown only this once");
    const key1 = plain.stdout.trim();
    // By its id, as JSON.
    const created = await json<{ key: string; apiKey: ApiKey }>(["keys", "create", "-p", project.id], env);
    expect(created.apiKey).toMatchObject({ name: "memory-admin", projectId: project.id, revokedAt: null });
    const key2 = created.key;

    const listed = await json<{ apiKeys: ApiKey[] }>(["keys", "list", "--project", project.id], env);
    expect(listed.apiKeys.map((k) => k.name)).toEqual(["memory-admin", "ci"]);
    const table = await cli(["keys", "list"], env);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID +PREVIEW +NAME +PROJECT +CREATED +LAST USED +REVOKED\n/);
    expect(table.stdout).toContain(`${listed.apiKeys[1].keyPreview}  ci `);
    for (const out of [table.stdout, JSON.stringify(listed)]) {
      expect(out).not.toContain(key1);
      expect(out).not.toContain(key2);
    }

    // By the start of its preview.
    const preview = listed.apiKeys[1].keyPreview;
    const byPreview = await cli(["keys", "revoke", preview.slice(0, 7)], env);
    expect(byPreview.code, byPreview.stderr).toBe(0);
    expect(byPreview.stdout).toBe(`Revoked API key ${listed.apiKeys[1].id} (${preview}, "ci").\n`);
    // By the key itself, then again by its id: revoking is idempotent.
    const byKey = await json<{ apiKey: ApiKey }>(["keys", "revoke", key2], env);
    expect(byKey.apiKey.revokedAt).not.toBeNull();
    const again = await json<{ apiKey: ApiKey }>(["keys", "revoke", byKey.apiKey.id], env);
    expect(again.apiKey.revokedAt).toBe(byKey.apiKey.revokedAt);
    const after = await json<{ apiKeys: ApiKey[] }>(["keys", "list", "-p", name], env);
    expect(after.apiKeys.every((k) => k.revokedAt !== null)).toBe(true);

    const unknown = await cli(["keys", "revoke", "key_doesnotexist"], env);
    expect(unknown).toMatchObject({ code: 1, stdout: "" });
    expect(unknown.stderr).toBe('error: API key "key_doesnotexist" not found (give its id, its preview or the key)\n');
  });

  it.runIf(target.embedded)("commands run at once on the embedded database wait for each other", async () => {
    const name = unique("together");
    const runs = await Promise.all([
      cli(["projects", "create", name, "--json"], env),
      cli(["projects", "list", "--json"], env),
      cli(["users", "list", "--json"], env),
    ]);
    expect(runs.map((r) => [r.code, r.stderr])).toEqual([
      [0, ""],
      [0, ""],
      [0, ""],
    ]);
  });

  it("refuses a key for a project that does not exist, and a second project of a name", async () => {
    const name = unique("twin");
    const missing = await cli(["keys", "create", "--project", name], env);
    expect(missing).toMatchObject({ code: 1, stdout: "", stderr: `error: Project "${name}" not found\n` });
    await json<{ project: Project }>(["projects", "create", name], env);
    // Names are unique, compared trimmed and in any case (the ambiguity a database made before
    // that may still hold: tests/db/migrations-project-names.test.ts).
    const twin = await cli(["projects", "create", name.toUpperCase()], env);
    expect(twin).toMatchObject({ code: 1, stdout: "", stderr: "error: Project name already taken\n" });
  });

  it("creates dashboard users and resets passwords, from stdin or generated and printed once", async () => {
    const name = unique("ops");
    const fromStdin = await cli(["users", "create", name, "--password-stdin"], env, { stdin: "first-password\n" });
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    expect(fromStdin.stdout).toMatch(new RegExp(`^Created user ${name} \\(usr_\\w+\\)\\.\\n$`));
    expect(fromStdin.stdout + fromStdin.stderr).not.toContain("first-password");

    const generated = await cli(["users", "create", `${name}-2`], env);
    expect(generated.code, generated.stderr).toBe(0);
    expect(generated.stdout).toMatch(/^[\w-]{24}\n$/);
    expect(generated.stderr).toContain("shown only this once");

    const taken = await cli(["users", "create", name, "--password", "whatever-password"], env);
    expect(taken).toMatchObject({ code: 1, stdout: "", stderr: "error: Username already taken\n" });

    // Named as it was created (and as the sign-in reads it): trimmed.
    const reset = await json<{ user: User; sessionsRevoked: number; password: string }>(
      ["users", "reset-password", ` ${name} `],
      env,
    );
    expect(reset.user.username).toBe(name);
    expect(reset.password).toMatch(/^[\w-]{24}$/);
    const unknown = await cli(["users", "reset-password", `${name}-nobody`, "--password-stdin"], env, {
      stdin: "third-password\n",
    });
    expect(unknown).toMatchObject({ code: 1, stdout: "", stderr: `error: User "${name}-nobody" not found\n` });

    // A name's escape sequences and bidirectional overrides reach no terminal, in any message.
    const odd = `${name}-\u001b]0;title\u0007-\u202ex`;
    const oddRun = await cli(["users", "create", odd, "--password", "whatever-password"], env);
    expect(oddRun.code, oddRun.stderr).toBe(0);
    expect(oddRun.stdout).toContain(`Created user ${name}-\\u001b]0;title\\u0007-\\u202ex (usr_`);
    const oddReset = await cli(["users", "reset-password", odd, "--password", "another-password"], env);
    expect(oddReset.stdout).toContain(`Password of ${name}-\\u001b]0;title\\u0007-\\u202ex reset`);

    const { users } = await json<{ users: User[] }>(["users", "list"], env);
    expect(users.map((u) => u.username)).toEqual(expect.arrayContaining([name, `${name}-2`, odd]));
    const listed = await cli(["users", "list"], env);
    for (const raw of ["\u001b", "\u0007", "\u202e"]) expect(listed.stdout).not.toContain(raw);
  });

  it("writes what the running server then honours; on the embedded database it leaves a running server's directory alone", async () => {
    const name = unique("live");
    const cliEnv = { ...env, ADMIN_PASSWORD: "" };
    await json(["users", "create", name, "--password-stdin"], cliEnv, "first-password\n");
    const { key } = await json<{ key: string }>(
      ["keys", "create", "--project", (await json<{ project: Project }>(["projects", "create", name], env)).project.id],
      env,
    );
    const signIn = (url: string, password: string) =>
      fetch(`${url}/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username: name, password }),
      });
    const thread = (url: string) =>
      fetch(`${url}/v1/threads`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ dataset: "cli" }),
      });

    const server = await startServerProcess(cliEnv);
    let session = "";
    try {
      const first = await signIn(server.url, "first-password");
      expect(first.status).toBe(200);
      session = ((await first.json()) as { token: string }).token;
      expect((await thread(server.url)).status).toBe(201);
      if (target.embedded) {
        const refused = await cli(["users", "reset-password", name, "--password-stdin"], env, {
          stdin: "second-password\n",
        });
        expect(refused).toMatchObject({ code: 1, stdout: "" });
        expect(refused.stderr).toBe(
          `error: The data directory ${env.PGLITE_DIR} is in use by a running server (pid ${server.child.pid}): ` +
            "stop it, or use the dashboard or the API.\n",
        );
        expect((await signIn(server.url, "first-password")).status).toBe(200);
        server.child.kill("SIGTERM");
        await server.exited;
      }
      const reset = await json<{ sessionsRevoked: number }>(
        ["users", "reset-password", name, "--password-stdin"],
        env,
        "second-password\n",
      );
      expect(reset.sessionsRevoked).toBeGreaterThanOrEqual(1);
      const preview = key.slice(0, 7);
      expect((await cli(["keys", "revoke", key], env)).stdout).toContain(`(${preview}`);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }

    const again = await startServerProcess(cliEnv);
    try {
      expect((await signIn(again.url, "first-password")).status).toBe(401);
      expect((await signIn(again.url, "second-password")).status).toBe(200);
      const old = await fetch(`${again.url}/auth/me`, { headers: { authorization: `Bearer ${session}` } });
      expect(await old.json()).toEqual({ error: "Session has been revoked" });
      const revoked = await thread(again.url);
      expect(revoked.status).toBe(401);
      expect(await revoked.json()).toEqual({ error: "API key has been revoked" });
    } finally {
      again.child.kill("SIGTERM");
      await again.exited;
    }
  });
});

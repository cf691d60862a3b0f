import { Command, CommanderError, InvalidArgumentError } from "commander";
import type { z } from "zod";
import { keyRefProblem, randomPassword } from "../lib/crypto";
import type { DbDeps } from "../lib/deps";
import { PASSWORD_LENGTH, passwordInput, text } from "../lib/inputs";
import { CliError } from "./errors";
import { type Column, note, type Output, print, printable, table, when } from "./output";

/**
 * `memory-admin`: the operator's command line over the database the server uses (DATABASE_URL, or
 * the embedded one at PGLITE_DIR). A thin shell over lib/'s verbs: it parses, opens the database,
 * calls one verb and prints. Exit codes: 0 done, 1 refused or failed, 2 a usage error. The verbs
 * and the drivers are imported by the command that runs: `--help` and a usage error load neither.
 */
const program = new Command("memory-admin")
  .description(
    "Administer the memory service: projects, API keys and dashboard users.\n" +
      "Works on DATABASE_URL when set, else on the embedded database in PGLITE_DIR (default .data/pglite),\n" +
      "as `npm start` does; it applies pending migrations first, as the server does at start.",
  )
  .option("--json", "print one JSON document on stdout (for scripts)")
  .configureHelp({ showGlobalOptions: true })
  .showHelpAfterError("(add --help for usage)")
  .exitOverride();

/** Reads the command's output mode and opens the database around `work`. */
async function run<T>(cmd: Command, work: (deps: DbDeps, out: Output) => Promise<T>): Promise<T> {
  const out: Output = { json: Boolean(cmd.optsWithGlobals().json) };
  const { withDatabase } = await import("./database");
  return withDatabase(process.env, (deps) => work(deps, out));
}

/** A commander argument parser from a zod rule: a bad value is a usage error naming the rule. */
const rule =
  (schema: z.ZodType<string>) =>
  (value: string): string => {
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw new InvalidArgumentError(parsed.error.issues[0]?.message ?? "invalid");
    return parsed.data;
  };
const name100 = rule(text().trim().min(1).max(100));
const keyRef = (value: string): string => {
  const problem = keyRefProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
};

/** Every page of a paged verb (100 rows a call): the rows under `key` of its answers. */
async function everyPage<K extends string, T>(
  key: K,
  list: (page: { limit: number; offset: number }) => Promise<Record<K, T[]> & { total: number }>,
): Promise<T[]> {
  const rows: T[] = [];
  for (let total = 1; rows.length < total; ) {
    const page = await list({ limit: 100, offset: rows.length });
    rows.push(...page[key]);
    total = page[key].length === 0 ? rows.length : page.total;
  }
  return rows;
}

// --- projects ---------------------------------------------------------------------------------

const projects = program.command("projects").description("Create and list projects");

projects
  .command("create")
  .description("Create a project; prints its id")
  .argument("<name>", "project name (1-100 characters)", name100)
  .action((name: string, _opts, cmd: Command) =>
    run(cmd, async (deps, out) => {
      const { createProject } = await import("../lib/projects");
      const project = await createProject(deps, { name });
      note(out, `Created project "${printable(project.name)}".`);
      print(out, { project }, project.id);
    }),
  );

projects
  .command("list")
  .description("List every project, newest first")
  .action((_opts, cmd: Command) =>
    run(cmd, async (deps, out) => {
      const { listProjects } = await import("../lib/projects");
      const rows = await everyPage("projects", (page) => listProjects(deps, page));
      type Project = (typeof rows)[number];
      const columns: Column<Project>[] = [
        ["ID", (p) => p.id],
        ["NAME", (p) => p.name],
        ["CREATED", (p) => when(p.createdAt)],
      ];
      print(out, { projects: rows, total: rows.length }, table(rows, columns, "No projects."));
    }),
  );

// --- API keys ---------------------------------------------------------------------------------

const keys = program.command("keys").description("Create, list and revoke API keys");

keys
  .command("create")
  .description("Create an API key; prints the key, once (only its hash is stored)")
  .requiredOption("-p, --project <project>", "the project's id, or its name if no other project has it", name100)
  .option("-n, --name <name>", "a label for the key (1-100 characters)", name100, "memory-admin")
  .action((opts: { project: string; name: string }, cmd: Command) =>
    run(cmd, async (deps, out) => {
      const [{ findProject }, { createApiKey }] = await Promise.all([
        import("../lib/projects"),
        import("../lib/api-keys"),
      ]);
      const project = await findProject(deps, { ref: opts.project });
      const created = await createApiKey({ deps, projectId: project.id }, { name: opts.name });
      note(
        out,
        `API key ${created.apiKey.id} ("${printable(opts.name)}") for project "${printable(project.name)}" (${project.id}).\n` +
          "It is shown only this once: store it now.",
      );
      print(out, created, created.key);
    }),
  );

keys
  .command("list")
  .description("List API keys (never the keys themselves), newest first")
  // A blank value (an unset shell variable) is refused, never read as "every project".
  .option("-p, --project <project>", "only this project's keys (id or unique name); default: every project", name100)
  .action((opts: { project?: string }, cmd: Command) =>
    run(cmd, async (deps, out) => {
      const [{ findProject, listProjects }, { listApiKeys }] = await Promise.all([
        import("../lib/projects"),
        import("../lib/api-keys"),
      ]);
      const chosen =
        opts.project !== undefined
          ? [await findProject(deps, { ref: opts.project })]
          : await everyPage("projects", (page) => listProjects(deps, page));
      const rows = [];
      for (const project of chosen) {
        rows.push(...(await everyPage("apiKeys", (page) => listApiKeys({ deps, projectId: project.id }, page))));
      }
      type Key = (typeof rows)[number];
      const names = new Map(chosen.map((p) => [p.id, p.name]));
      const columns: Column<Key>[] = [
        ["ID", (k) => k.id],
        ["PREVIEW", (k) => k.keyPreview],
        ["NAME", (k) => k.name],
        ["PROJECT", (k) => `${names.get(k.projectId ?? "") ?? "-"} (${k.projectId ?? "none"})`],
        ["CREATED", (k) => when(k.createdAt)],
        ["LAST USED", (k) => when(k.lastUsedAt)],
        ["REVOKED", (k) => when(k.revokedAt)],
      ];
      print(out, { apiKeys: rows, total: rows.length }, table(rows, columns, "No API keys."));
    }),
  );

keys
  .command("revoke")
  .description("Revoke an API key at once and for good (revoking it again changes nothing)")
  .argument("<key>", "the key's id (key_...), its preview or the start of it (mk_1a2b), or the key itself", keyRef)
  .action((ref: string, _opts, cmd: Command) =>
    run(cmd, async (deps, out) => {
      const { findApiKey, revokeApiKey } = await import("../lib/api-keys");
      const found = await findApiKey(deps, { ref });
      const { apiKey } = await revokeApiKey(deps, { apiKeyId: found.id });
      const named = `API key ${apiKey.id} (${apiKey.keyPreview}, "${printable(apiKey.name)}")`;
      if (found.revokedAt) return print(out, { apiKey }, `${named} was already revoked at ${apiKey.revokedAt}.`);
      note(out, "Requests with it now get 401.");
      print(out, { apiKey }, `Revoked ${named}.`);
    }),
  );

// --- users ------------------------------------------------------------------------------------

const users = program
  .command("users")
  .description("Create and list dashboard users, reset a password (every user can manage everything: no roles)");

interface PasswordOptions {
  password?: string;
  passwordStdin?: boolean;
}

const withPasswordOptions = (cmd: Command) =>
  cmd
    .option("--password-stdin", "read the password from stdin (one line), keeping it out of the process list")
    .option(
      "--password <password>",
      "the password (visible to other users in the process list: prefer --password-stdin)",
    )
    .addHelpText(
      "after",
      `\nWithout either option a password is generated and printed once. Passwords have ${PASSWORD_LENGTH.min}-${PASSWORD_LENGTH.max} characters.`,
    );

/** The password the options give (checked as the server checks it), or a generated one. */
async function chosenPassword(cmd: Command, opts: PasswordOptions): Promise<{ password: string; generated: boolean }> {
  if (opts.password !== undefined && opts.passwordStdin) {
    cmd.error("error: give --password or --password-stdin, not both", { exitCode: 2 });
  }
  const password = opts.passwordStdin ? await stdinLine(cmd) : opts.password;
  if (password === undefined) return { password: randomPassword(), generated: true };
  const { min, max } = PASSWORD_LENGTH;
  if (!passwordInput().safeParse(password).success) {
    const from = opts.passwordStdin ? "the password read from stdin" : "--password";
    const length = [...password].length;
    cmd.error(`error: ${from} must have ${min}-${max} characters (it has ${length})`, { exitCode: 2 });
  }
  return { password, generated: false };
}

async function stdinLine(cmd: Command): Promise<string> {
  if (process.stdin.isTTY) note({ json: false }, "Password (then Enter and Ctrl-D):");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const line = Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
  if (line.includes("\n")) cmd.error("error: --password-stdin reads one line; stdin has several", { exitCode: 2 });
  return line;
}

withPasswordOptions(
  users.command("create").description("Create a dashboard user").argument("<username>", "1-100 characters", name100),
).action((username: string, opts: PasswordOptions, cmd: Command) =>
  chosenPassword(cmd, opts).then(({ password, generated }) =>
    run(cmd, async (deps, out) => {
      const { createUser } = await import("../lib/users");
      const user = await createUser(deps, { username, password });
      const created = `Created user ${printable(user.username)} (${user.id}).`;
      if (!generated) return print(out, { user }, created);
      note(out, `${created} Their password, shown only this once:`);
      print(out, { user, password }, password);
    }),
  ),
);

users
  .command("list")
  .description("List dashboard users, newest first")
  .action((_opts, cmd: Command) =>
    run(cmd, async (deps, out) => {
      const { listUsers } = await import("../lib/users");
      const rows = await everyPage("users", (page) => listUsers(deps, page));
      type User = (typeof rows)[number];
      const columns: Column<User>[] = [
        ["ID", (u) => u.id],
        ["USERNAME", (u) => u.username],
        ["CREATED", (u) => when(u.createdAt)],
        ["UPDATED", (u) => when(u.updatedAt)],
      ];
      print(out, { users: rows, total: rows.length }, table(rows, columns, "No users."));
    }),
  );

withPasswordOptions(
  users
    .command("reset-password")
    .description("Set a user's password (e.g. a lost admin password); signs them out everywhere")
    .argument("<username>", "the user's name", name100),
).action((username: string, opts: PasswordOptions, cmd: Command) =>
  chosenPassword(cmd, opts).then(({ password, generated }) =>
    run(cmd, async (deps, out) => {
      const { resetPassword } = await import("../lib/users");
      const { user, sessionsRevoked } = await resetPassword(deps, { username, password });
      const done = `Password of ${printable(user.username)} reset; ${sessionsRevoked} session(s) signed out.`;
      if (!generated) return print(out, { user, sessionsRevoked }, done);
      note(out, `${done} The new password, shown only this once:`);
      print(out, { user, sessionsRevoked, password }, password);
    }),
  ),
);

/** Usage errors exit 2, refusals and failures 1, each as one line on stderr (a stack only for a bug). */
async function main(argv: string[]): Promise<number> {
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2; // commander printed it
    if (err instanceof CliError) {
      process.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    const [{ failureText, httpErrorOf }, { DrizzleQueryError }] = await Promise.all([
      import("../lib/errors"),
      import("drizzle-orm"),
    ]);
    // A verb's refusal (not found, name taken...), thrown as the API would answer it.
    const refusal = httpErrorOf(err);
    if (refusal) {
      process.stderr.write(`error: ${refusal.message}\n`);
      return 1;
    }
    if (err instanceof DrizzleQueryError) {
      // The database's own words: the query builder's message lists the statement's parameters
      // (a new password's hash, a key's hash).
      process.stderr.write(`error: ${failureText(err)}\n`);
      return 1;
    }
    process.stderr.write(`error: unexpected: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv);

import { readFileSync } from "node:fs";
import { systemClock } from "../lib/clock";
import { type Config, ConfigError, parseConfig } from "../lib/config";
import { DirectoryInUseError } from "../lib/db/dir-lock";
import { migrateDatabase } from "../lib/db/migrate";
import { databaseName } from "../lib/db/name";
import { createDatabase } from "../lib/db/node";
import type { Database } from "../lib/db/types";
import type { DbDeps } from "../lib/deps";
import { databaseEmbeddingSizes, databaseMismatch } from "../lib/llm/embedding-check";
import { driverReason } from "../lib/start-failure";
import { CliError } from "./errors";

/** The environment, read as `npm start` reads it; a bad variable is named (as the server names it). */
export function configFrom(env: NodeJS.ProcessEnv): Config {
  try {
    return parseConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(err.message, 2);
    throw err;
  }
}

/**
 * Opens the database the server would use and brings it up to date as the server does at start
 * (the same migrations; EMBEDDING_DIMENSIONS checked against it first, never against the model),
 * runs `work` over it and closes it. The embedded database takes the directory's lock: while a
 * server holds it, the command stops with one sentence instead of touching the files.
 */
export async function withDatabase<T>(env: NodeJS.ProcessEnv, work: (deps: DbDeps) => Promise<T>): Promise<T> {
  const config = configFrom(env);
  const database = await open(config);
  try {
    await prepare(database, config);
    return await work({ db: database.db, clock: systemClock });
  } finally {
    await database.close();
  }
}

/**
 * How long a command waits for another `memory-admin` command holding the embedded database
 * (commands run in a script with `&` or `xargs -P`, two cron jobs): each holds it a second or two.
 */
export const COMMAND_LOCK_WAIT_MS = 30_000;

async function open(config: Config): Promise<Database> {
  const deadline = Date.now() + COMMAND_LOCK_WAIT_MS;
  for (;;) {
    try {
      return await createDatabase(config);
    } catch (err) {
      if (!(err instanceof DirectoryInUseError)) {
        throw new CliError(`Cannot open ${databaseName(config)}: ${reason(err)}`);
      }
      const command = err.pid !== undefined && isAdminCommand(err.pid);
      if (command && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      const holder = err.pid ? ` (pid ${err.pid})` : "";
      throw new CliError(
        command
          ? `The data directory ${config.pgliteDir} is in use by another memory-admin command${holder} that has not finished in ${COMMAND_LOCK_WAIT_MS / 1000} s.`
          : `The data directory ${config.pgliteDir} is in use by a running server${holder}: stop it, or use the dashboard or the API.`,
      );
    }
  }
}

/** Whether process `pid` runs this command line (Linux's /proc; elsewhere a holder is taken for a server). */
function isAdminCommand(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8")
      .split("\0")
      .some((arg) => /(^|\/)memory-admin(\.mjs|\.ts)?$/.test(arg));
  } catch {
    return false;
  }
}

async function prepare(database: Database, config: Config): Promise<void> {
  let problem: string | undefined;
  try {
    problem = databaseMismatch(config, await databaseEmbeddingSizes(database.db));
    if (!problem) await migrateDatabase(database, config.openai.embeddingDimensions);
  } catch (err) {
    throw new CliError(`Cannot prepare ${databaseName(config)}: ${reason(err)}`);
  }
  if (problem) throw new CliError(problem);
}

/** A driver's error as one line (a refused connection is an AggregateError with no message). */
function reason(err: unknown): string {
  return driverReason((err as { errors?: unknown[] }).errors?.[0] ?? err);
}

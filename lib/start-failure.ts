import { type Config, ConfigError } from "./config";
import { DirectoryInUseError } from "./db/dir-lock";
import { databaseName } from "./db/name";
import { failureText } from "./errors";
import { EmbeddingDimensionsError } from "./llm/embedding-check";

/**
 * What `npm start` prints when it cannot start for a reason the operator fixes (the configuration,
 * the port, the data directory, the database it cannot reach, the embedding size): one plain
 * sentence saying what to set, not a log line with a stack. Null for anything else: a bug, logged
 * with its stack. `config` is the configuration read, when it could be.
 */
export function startFailureMessage(err: unknown, config?: Pick<Config, "databaseUrl" | "pgliteDir">): string | null {
  if (err instanceof ConfigError || err instanceof DirectoryInUseError || err instanceof EmbeddingDimensionsError) {
    return err.message;
  }
  const { code, port } = (err ?? {}) as { code?: unknown; port?: unknown };
  if (code === "EADDRINUSE") {
    return `Port ${port} is already in use (another server, or a second \`npm start\`?): stop it, or set PORT to a free port.`;
  }
  if (code === "EACCES" && port !== undefined) {
    return `Port ${port} needs privileges this process does not have: set PORT to a port above 1023.`;
  }
  const unreachable = config ? connectionFailure(err, config) : undefined;
  if (config && unreachable) {
    const what = config.databaseUrl
      ? "check that the server is running and that DATABASE_URL names it, its database and credentials"
      : `check that PGLITE_DIR names a directory this process can write, in a directory it can write too (the lock file ${config.pgliteDir.replace(/\/+$/, "")}.lock goes beside it)`;
    return `Cannot open ${databaseName(config)}: ${driverReason(unreachable)}; ${what}.`;
  }
  return null;
}

/**
 * Errors that say the database cannot be reached, not that a statement is wrong: the network's
 * codes, and Postgres's connection (08), authorisation (28), unknown database (3D000), starting-up
 * (57P03) and too-many-connections (53300) SQLSTATEs. For the embedded database: a file system
 * error on a path in its data directory (its lock file included), not on any other file.
 */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "3D000",
  "57P03",
  "53300",
]);
const FILE_CODES = new Set(["ENOENT", "ENOTDIR", "EACCES", "EPERM", "EROFS", "ENOSPC"]);

function saysUnreachable(err: object, config: Pick<Config, "databaseUrl" | "pgliteDir">): boolean {
  const { code, path } = err as { code?: unknown; path?: unknown };
  if (typeof code !== "string") return false;
  if (config.databaseUrl) return NETWORK_CODES.has(code) || /^(08|28)[0-9A-Z]{3}$/.test(code);
  // A path in the data directory (its lock file beside it included), or one of its parents
  // (creating the directory failed there).
  const dir = config.pgliteDir.replace(/\/+$/, "");
  return (
    FILE_CODES.has(code) &&
    typeof path === "string" &&
    (path.startsWith(dir) || (path.length > 0 && dir.startsWith(`${path.replace(/\/+$/, "")}/`)))
  );
}

/** The error in `err`'s chain (causes, an AggregateError's errors) that says so, if any. */
export function connectionFailure(err: unknown, config: Pick<Config, "databaseUrl" | "pgliteDir">, depth = 0): unknown {
  if (!err || typeof err !== "object" || depth > 5) return undefined;
  if (saysUnreachable(err, config)) return err;
  for (const inner of [(err as { cause?: unknown }).cause, ...((err as { errors?: unknown[] }).errors ?? [])]) {
    const found = connectionFailure(inner, config, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** A driver's error as one line: its message, or its code when it has none (a refused connection's). */
export function driverReason(err: unknown): string {
  const text = failureText(err);
  const code = (err as { code?: unknown } | null)?.code;
  return text || (typeof code === "string" ? code : String(err));
}

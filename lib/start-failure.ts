import { ConfigError } from "./config";
import { DirectoryInUseError } from "./db/dir-lock";
import { EmbeddingDimensionsError } from "./llm/embedding-check";

/**
 * What `npm start` prints when it cannot start for a reason the operator fixes (the configuration,
 * the port, the data directory, the embedding size): one plain sentence saying what to set, not
 * a log line with a stack. Null for anything else: a bug, logged with its stack.
 */
export function startFailureMessage(err: unknown): string | null {
  if (err instanceof ConfigError || err instanceof DirectoryInUseError || err instanceof EmbeddingDimensionsError) {
    return err.message;
  }
  const { code, port } = (err ?? {}) as { code?: unknown; port?: unknown };
  if (code === "EADDRINUSE") {
    return `Port ${port} is already in use (another server, or a second \`npm start\`?): stop it, or set PORT to a free port.`;
  }
  if (code === "EACCES") {
    return `Port ${port} needs privileges this process does not have: set PORT to a port above 1023.`;
  }
  return null;
}

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The repository's root: where package.json and functions/server.ts are. */
export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * The Node.js flags in a start script (`exec node <flags> bin/server.mjs`): what comes between
 * `node` and the entry, its last word. (`exec` makes the shell npm runs the script in become
 * node, so a signal npm forwards reaches the server rather than ending the shell above it.)
 */
export function startScriptNodeFlags(startScript: string): string[] {
  return startScriptWords(startScript).slice(0, -1);
}

function startScriptWords(startScript: string): string[] {
  const words = startScript.trim().split(/\s+/);
  if (words[0] === "exec") words.shift();
  if (words[0] !== "node" || words.length < 2) throw new Error(`the start script does not run node: ${startScript}`);
  return words.slice(1);
}

/**
 * The arguments after the node binary that run the Node.js host as `npm start` does (its flags
 * and its entry, from package.json's start script), for the tests and the bench that spawn the
 * server: one node process, no npm parent in between.
 */
export function npmStartArgs(): string[] {
  const pkg = JSON.parse(readFileSync(`${REPO_ROOT}/package.json`, "utf8")) as { scripts: { start: string } };
  return startScriptWords(pkg.scripts.start);
}

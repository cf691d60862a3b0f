import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { npmStartArgs, REPO_ROOT } from "../../dev/start-command";
import { testLogLevel } from "./log";

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * `npm start`'s entry as a child process; resolves once it prints its Listening line. It starts in
 * 1-3 s alone, but CI runs two test files at a time beside each one's servers: on a loaded machine
 * a start once took more than 30 s (bench/RESULTS.md, night of 2026-11-29), so a hang fails at 60.
 */
export async function startServerProcess(
  env: Record<string, string>,
  timeoutMs = 60_000,
  /** A command the server runs under (e.g. strace and its options). */
  wrapper: string[] = [],
): Promise<ServerProcess> {
  const port = await freePort();
  // As `npm start` runs it (its Node.js flags and its entry): one node process, no npm parent
  // (killing that parent would leave the server running).
  const [command, ...args] = [...wrapper, process.execPath, ...npmStartArgs()];
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    // Warnings and errors only (in `output()`, for a failure's message) unless a test sets LOG_LEVEL.
    env: { ...process.env, LOG_LEVEL: testLogLevel("warn"), ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = interleavedOutput(child);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${output()}`)), timeoutMs);
    const check = setInterval(() => {
      if (output().includes(`Listening on ${url}`)) {
        clearInterval(check);
        clearTimeout(timer);
        resolve();
      }
    }, 25);
    exited.then((code) => {
      clearInterval(check);
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${output()}`));
    });
  }).catch((err) => {
    child.kill("SIGKILL");
    throw err;
  });
  return { child, url, output, exited };
}

/**
 * `npm start`'s entry as a child process that is expected not to start: resolves with its exit
 * code and its stdout and stderr once it exits (killed, and rejected, after `timeoutMs`).
 */
export async function runServerToExit(
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, npmStartArgs(), {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: testLogLevel("warn"), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d) => {
    stdout += d;
  });
  child.stderr?.on("data", (d) => {
    stderr += d;
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
  clearTimeout(timer);
  if (code === null) throw new Error(`server did not exit in ${timeoutMs} ms:\n${stdout}${stderr}`);
  return { code, stdout, stderr };
}

/**
 * Runs a command to its exit, its stdout and stderr gathered in the order they came (for a
 * failing assertion's message): a tool's own test suite, the bench.
 */
export async function runToExit(
  command: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<{ code: number | null; output: string }> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = interleavedOutput(child);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", resolve);
  });
  return { code, output: output() };
}

/** A child's stdout and stderr as one text, in the order they came; read it at any time. */
function interleavedOutput(child: ChildProcess): () => string {
  let output = "";
  const gather = (d: Buffer | string) => {
    output += d;
  };
  child.stdout?.on("data", gather);
  child.stderr?.on("data", gather);
  return () => output;
}

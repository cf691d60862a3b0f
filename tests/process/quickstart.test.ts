import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../helpers/process";

/**
 * The README's quick start, run as written, so the guide cannot rot. Between the quickstart
 * markers, the ```sh blocks are: the install (not run here), `npm run demo:provider` and the
 * `... npm start` line (each started here as a child process, with the environment the README
 * shows), then the curl + jq commands, which run in one bash, in order, after the server is up.
 * The ```sh blocks between the provider's and the server's (the admin command line, which works on
 * the database before the server holds it) run in one bash before the server starts.
 * The documented ports (8787, 8788), data directory (.data/demo) and key file (.data/demo.key) are
 * replaced by free ports and a temporary directory. Every line of a ```text output block that follows a command block must
 * be in that command's output, except lines abbreviated with "..." (dates are compared as dates).
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const README = readFileSync(join(ROOT, "README.md"), "utf8");

interface Block {
  lang: string;
  code: string;
}

function quickstartBlocks(readme: string): Block[] {
  const start = readme.indexOf("<!-- quickstart:start -->");
  const end = readme.indexOf("<!-- quickstart:end -->");
  if (start < 0 || end < start) throw new Error("README.md has no quickstart markers");
  return [...readme.slice(start, end).matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1],
    code: m[2],
  }));
}

const has = (command: string) => {
  try {
    execFileSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
};
const inCi = !!process.env.CI && process.env.CI !== "false" && process.env.CI !== "0";
const tools = has("curl") && has("jq");
if (!tools && !inCi)
  console.warn("!! curl or jq not found: the README quick-start test is skipped (apt-get install jq)");

/** The environment of a fresh shell: nothing of this machine's service configuration leaks in. */
function baseEnv(): Record<string, string> {
  const skip = /^(OPENAI_|ADMIN_|PGLITE_|DATABASE_URL$|NEON_|EMBEDDING_|LLM_MODEL$|QSTASH_|PORT$|DEMO_PROVIDER_PORT$)/;
  return Object.fromEntries(
    Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined && !skip.test(e[0])),
  );
}

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

const started: Started[] = [];

/** A README command line in bash, in its own process group (npm starts node under a shell). */
function startCommand(line: string, env: Record<string, string>): Started {
  const child = spawn("bash", ["-c", line], {
    cwd: ROOT,
    env: { ...baseEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const s = { child, output: () => out, exited };
  started.push(s);
  return s;
}

async function waitFor(s: Started, text: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  s.exited.then(() => {
    exited = true;
  });
  while (!s.output().includes(text)) {
    if (exited) throw new Error(`exited before printing "${text}":\n${s.output()}`);
    if (Date.now() > deadline) throw new Error(`did not print "${text}" in ${timeoutMs} ms:\n${s.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stop(s: Started) {
  const group = s.child.pid;
  if (group === undefined || s.child.exitCode !== null || s.child.signalCode !== null) return;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-group, sig);
    } catch {
      // the group is gone already
    }
  };
  signal("SIGTERM");
  const exited = await Promise.race([s.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
  if (!exited) signal("SIGKILL");
}

const dir = mkdtempSync(join(tmpdir(), "memsvc-quickstart-"));
afterAll(async () => {
  await Promise.all(started.map(stop));
  rmSync(dir, { recursive: true, force: true });
});

/** Replace every `from` (which must occur) by `to`. */
function substitute(text: string, from: string, to: string) {
  expect(text, `the README's quick start should mention ${from}`).toContain(from);
  return text.replaceAll(from, to);
}

const normalise = (line: string) => line.trim().replace(/\d{4}-\d{2}-\d{2}/g, "YYYY-MM-DD");

describe.runIf(tools || inCi)("README quick start", { timeout: 180_000 }, () => {
  it("curl and jq are installed (CI installs jq)", () => {
    expect(tools, "curl or jq not found: apt-get install curl jq").toBe(true);
  });

  it("goes from npm start to a recalled fact with the demo provider, as written", async () => {
    const blocks = quickstartBlocks(README);
    const sh = blocks.filter((b) => b.lang === "sh");
    const providerBlock = sh.find((b) => /^npm run demo:provider$/m.test(b.code));
    const serverIndex = blocks.findIndex((b) => b.lang === "sh" && /\bnpm start$/m.test(b.code));
    expect(providerBlock, "a ```sh block with `npm run demo:provider`").toBeDefined();
    expect(serverIndex, "a ```sh block ending in `npm start`").toBeGreaterThanOrEqual(0);
    const serverLine = blocks[serverIndex].code.trim();
    expect(serverLine.split("\n"), "the server block is one command line").toHaveLength(1);

    const [providerPort, serverPort] = [await freePort(), await freePort()];
    const pgliteDir = join(dir, "pglite");
    const keyFile = join(dir, "demo.key");
    const local = (text: string) =>
      text
        .replaceAll("127.0.0.1:8788", `127.0.0.1:${providerPort}`)
        .replaceAll("127.0.0.1:8787", `127.0.0.1:${serverPort}`)
        .replaceAll(".data/demo.key", keyFile);
    const providerIndex = blocks.indexOf(providerBlock as Block);
    const adminBlocks = blocks.slice(providerIndex + 1, serverIndex).filter((b) => b.lang === "sh");
    expect(adminBlocks.map((b) => b.code).join("\n"), "a key made with the admin command line").toMatch(
      /npx memory-admin keys create .*> \.data\/demo\.key$/m,
    );

    // The loop: every ```sh block after the server's, each with the output blocks that follow it.
    const steps: { code: string; expected: string[] }[] = [];
    for (const block of blocks.slice(serverIndex + 1)) {
      if (block.lang === "sh") steps.push({ code: local(block.code), expected: [] });
      else if (block.lang === "text" && steps.length > 0) steps.at(-1)?.expected.push(block.code);
    }
    expect(steps.length).toBeGreaterThanOrEqual(4);
    const loop = steps.map((s) => s.code).join("\n");
    expect(loop, "the commands talk to the documented server address").toContain("127.0.0.1:");
    expect(loop).not.toMatch(/:878[78]\b/);

    const t0 = Date.now();
    const provider = startCommand(local(providerBlock?.code.trim() ?? ""), {
      DEMO_PROVIDER_PORT: String(providerPort),
    });
    const providerUrl = `http://127.0.0.1:${providerPort}/v1`;
    await waitFor(provider, `listening on ${providerUrl}`, 20_000);
    // The provider says how to point the service at it, as the README's server line does.
    expect(provider.output()).toContain(`OPENAI_BASE_URL=${providerUrl}`);

    // The admin command line makes the project and the key before the server starts.
    const admin = substitute(
      local(adminBlocks.map((b) => b.code).join("\n")),
      "PGLITE_DIR=.data/demo",
      `PGLITE_DIR=${pgliteDir}`,
    );
    const adminStarted = Date.now();
    try {
      execFileSync("bash", ["-c", `set -euo pipefail\n${admin}`], {
        cwd: ROOT,
        env: baseEnv(),
        encoding: "utf8",
        timeout: 90_000,
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      throw new Error(`the admin command line failed:\n${e.stdout}\n${e.stderr}`);
    }
    expect(readFileSync(keyFile, "utf8")).toMatch(/^mk_[0-9a-f]+\n?$/);
    const adminDone = Date.now();

    let serverCommand = substitute(
      serverLine,
      "OPENAI_BASE_URL=http://127.0.0.1:8788/v1",
      `OPENAI_BASE_URL=${providerUrl}`,
    );
    serverCommand = substitute(serverCommand, "PGLITE_DIR=.data/demo", `PGLITE_DIR=${pgliteDir}`);
    const server = startCommand(serverCommand, { PORT: String(serverPort) });
    const serverSpawned = Date.now();
    await waitFor(server, `Listening on http://127.0.0.1:${serverPort}`, 40_000);
    const listening = Date.now();

    // One bash for all the blocks, as one terminal: variables and the say() function carry over.
    const marker = (i: number) => `=== quickstart step ${i} ===`;
    const script = ["set -euo pipefail", ...steps.flatMap((s, i) => [`echo '${marker(i)}'`, s.code])].join("\n");
    let stdout: string;
    try {
      stdout = execFileSync("bash", ["-c", script], {
        cwd: ROOT,
        env: baseEnv(),
        encoding: "utf8",
        timeout: 30_000,
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      throw new Error(`the quick start failed:\n${e.stdout}\n${e.stderr}\nserver:\n${server.output()}`);
    }
    const done = Date.now();
    console.log(
      `quick start: provider up in ${adminStarted - t0} ms, the key made in ${adminDone - adminStarted} ms, server up in ${listening - serverSpawned} ms, ` +
        `the commands (sign-in to recall) in ${done - listening} ms; npm start to recall: ${done - serverSpawned} ms`,
    );

    const outputs = stdout.split(/^=== quickstart step \d+ ===\n/m).slice(1);
    expect(outputs).toHaveLength(steps.length);
    let checked = 0;
    steps.forEach((step, i) => {
      const actual = outputs[i].split("\n").map(normalise);
      for (const expected of step.expected.flatMap((b) => b.split("\n"))) {
        if (!expected.trim() || expected.includes("...")) continue;
        expect(actual, `step ${i + 1} prints ${expected}`).toContain(normalise(expected));
        checked++;
      }
    });
    // The documented outputs are compared (a change of fence would otherwise check nothing).
    expect(checked).toBeGreaterThanOrEqual(8);
    // The recall: the last step prints the context block, which has the fact.
    const context = outputs.at(-1) ?? "";
    expect(context).toContain("# FACTS");
    expect(context).toMatch(/^- user lives in Lisbon \(valid: \d{4}-\d{2}-\d{2} - present\)$/m);
  });
});

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { freePort } from "../helpers/process";

/**
 * `npm run dev` for real: scripts/dev-edge.ts as a child process (embedded database in memory,
 * `wrangler dev` on workerd, the model on the fake provider), used over HTTP only. Background
 * work must run with nobody poking the scheduled handler: an ended thread and an idle one each
 * reach a completed episode within seconds.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ADMIN_PASSWORD = "dev-edge-test-password";

let dir: string;
let provider: FakeOpenAI;
let child: ChildProcess | undefined;
let exited: Promise<void> = Promise.resolve();
let output = "";
let url: string;
let key: string;

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms; npm run dev said:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function call(path: string, init: { method?: string; token?: string; json?: unknown } = {}) {
  const res = await fetch(`${url}${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.json === undefined ? {} : { "content-type": "application/json" }),
    },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "memsvc-dev-edge-"));
  provider = await startFakeOpenAI();
  provider.onStructured("episode_summary", (request) => ({
    summary: `Dev summary of: ${request.messages.at(-1)?.content.slice(0, 200)}`,
    keyLearnings: [],
  }));
  // The Worker's secrets come from this file instead of the developer's own .dev.vars.
  const envFile = join(dir, "dev.vars");
  writeFileSync(envFile, "OPENAI_API_KEY=test-key\n");
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  // As `npm run dev` runs it (tsx as a loader), in a process group of its own so that wrangler and
  // workerd under it are stopped with it.
  child = spawn(process.execPath, ["--import", "tsx", "scripts/dev-edge.ts", "--env-file", envFile], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      PGLITE_DIR: "memory://",
      PORT: String(port),
      ADMIN_PASSWORD,
      OPENAI_BASE_URL: provider.url,
      EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
      WRANGLER_SEND_METRICS: "false",
      NO_COLOR: "1",
    },
  });
  const started = child;
  exited = new Promise((resolve) => started.once("exit", () => resolve()));
  started.stdout?.on("data", (d) => {
    output += d;
  });
  started.stderr?.on("data", (d) => {
    output += d;
  });
  await waitFor(
    "npm run dev answered /health",
    async () => {
      if (started.exitCode !== null) throw new Error(`npm run dev exited with ${started.exitCode}:\n${output}`);
      return (await fetch(`${url}/health`)).ok || undefined;
    },
    60_000,
  ).catch((err) => {
    if (started.exitCode !== null) throw new Error(`npm run dev exited with ${started.exitCode}:\n${output}`);
    throw err;
  });

  // An API key as a developer makes one: admin login, a project, a key (the dashboard routes).
  const login = await call("/auth/login", { json: { username: "admin", password: ADMIN_PASSWORD } });
  expect(login.status).toBe(200);
  const session = login.body.token as string;
  const project = await call("/dashboard/projects", { token: session, json: { name: "dev-edge" } });
  expect(project.status).toBe(201);
  const created = await call("/dashboard/api-keys", {
    token: session,
    json: { name: "dev-edge-key", projectId: project.body.project.id },
  });
  expect(created.status).toBe(201);
  key = created.body.key;
}, 90_000);

afterAll(async () => {
  const pid = child?.pid;
  if (pid !== undefined && child?.exitCode === null && child.signalCode === null) {
    // SIGTERM to the group: the script stops wrangler (which stops workerd), then closes the
    // database and exits. Anything of the group still there after 10 s is killed.
    const group = (signal: NodeJS.Signals) => {
      try {
        process.kill(-pid, signal);
      } catch {}
    };
    group("SIGTERM");
    const stopped = await Promise.race([
      exited.then(() => true),
      new Promise((r) => setTimeout(() => r(false), 10_000)),
    ]);
    if (!stopped) child?.kill("SIGKILL");
    // workerd or wrangler outliving the script: the group is ours alone.
    group("SIGKILL");
  }
  await provider?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

async function threadWithMessages(marker: string, settings?: unknown) {
  const created = await call("/v1/threads", {
    token: key,
    json: { dataset: "dev-edge", ...(settings ? { settings } : {}) },
  });
  expect(created.status).toBe(201);
  const threadId: string = created.body.threadId;
  for (const content of [`${marker} prefers window seats`, "Got it."]) {
    const res = await call(`/v1/memory/working/threads/${threadId}/messages`, {
      token: key,
      json: { role: "user", content },
    });
    expect(res.status).toBe(201);
  }
  return threadId;
}

describe("npm run dev runs background work with no manual step", { timeout: 60_000 }, () => {
  it("completes the episode of an ended thread within seconds (the doorbell, through the local QStash)", async () => {
    const threadId = await threadWithMessages("maria");
    const ended = await call(`/v1/threads/${threadId}/end`, { method: "POST", token: key });
    expect(ended.status).toBe(200);
    const episodeId: string = ended.body.episodeId;
    expect(episodeId).toMatch(/^epi_/);

    const startedAt = Date.now();
    const episode = await waitFor(
      "the ended thread's episode completed",
      async () => {
        const res = await call(`/v1/memory/episodic/episodes/${episodeId}`, { token: key });
        return res.body?.episode?.status === "completed" ? res.body.episode : undefined;
      },
      15_000,
    );
    expect(episode.summary).toContain("maria prefers window seats");
    expect(episode.metadata).toMatchObject({ trigger: "end" });
    // The doorbell, not the next cron minute: well under the cron's period.
    expect(Date.now() - startedAt).toBeLessThan(15_000);
  });

  it("cuts and completes an episode when the idle timer fires, with no end", async () => {
    const threadId = await threadWithMessages("nora", { episodic: { autoEpisodeIntervalMs: 1000 } });
    const episode = await waitFor(
      "the idle thread's episode completed",
      async () => {
        const res = await call("/v1/memory/episodic/datasets/dev-edge/episodes?limit=50", { token: key });
        return res.body?.episodes?.find((e: { threadId: string }) => e.threadId === threadId);
      },
      15_000,
    );
    expect(episode).toMatchObject({ status: "completed", metadata: { trigger: "idle" } });
    expect(episode.summary).toContain("nora prefers window seats");
  });

  it("runs the cron at start, and the scheduled handler answers the local pokes", async () => {
    await waitFor(
      "the start-up cron run",
      async () => output.includes('[dev cron] start-up run of "* * * * *" done') || undefined,
      10_000,
    );
    // wrangler's documented poke names no cron: the configured trigger runs.
    const poke = await call("/cdn-cgi/local/scheduled?format=json");
    expect(poke).toEqual({ status: 200, body: { outcome: "ok", noRetry: false } });
    const named = await call(`/cdn-cgi/local/scheduled?format=json&cron=${encodeURIComponent("* * * * *")}`);
    expect(named.body.outcome).toBe("ok");
    // --test-scheduled's route, which sends an empty cron as well.
    expect((await call("/__scheduled")).status).toBe(200);
    // A cron string the Worker does not know stays an error.
    const unknown = await call(`/cdn-cgi/local/scheduled?format=json&cron=${encodeURIComponent("*/5 * * * *")}`);
    expect(unknown).toEqual({ status: 500, body: { outcome: "exception", noRetry: false } });
    expect(output).not.toMatch(/\[dev (cron|qstash)\] .*(failed|exception)/);
  });
});

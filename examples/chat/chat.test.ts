import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createMemoryClient } from "@memory-service/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Host, startHost } from "../../packages/client/test/helpers/host";

/**
 * The example chat app as a user runs it (`npm start` in examples/chat, as a child process fed on
 * standard input) against the Node.js host over HTTP, with the fake OpenAI-compatible provider as
 * both the service's model (the demo provider's rules extract the facts) and the app's chat model.
 * A fact said in one thread is recalled into the prompt of an answer in a later thread.
 */
const DIR = fileURLToPath(new URL(".", import.meta.url));
let host: Host;
let app: ChildProcess | undefined;

beforeAll(async () => {
  // The host's own timer doorbell: ending a thread runs its extraction, as in production.
  host = await startHost({ doorbell: "timers" });
});
afterAll(async () => {
  app?.kill("SIGKILL");
  await host?.close();
});

it("remembers across threads: a fact from an earlier thread is in a later answer's prompt", async () => {
  const { key } = await host.tenant();
  host.provider.onText((request) => {
    const last = request.messages.at(-1)?.content ?? "";
    return `(fake model) You said: ${last}`;
  });
  app = spawn(process.execPath, ["--conditions=development", "--import", "tsx", "src/main.ts"], {
    cwd: DIR,
    env: {
      ...process.env,
      MEMORY_URL: host.url,
      MEMORY_API_KEY: key,
      MEMORY_DATASET: "alice",
      OPENAI_BASE_URL: host.provider.url,
      OPENAI_API_KEY: "test-key",
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  app.stdout?.on("data", (d) => {
    out += d;
  });
  app.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => app?.once("exit", resolve));
  const waitFor = async (text: string, from = 0) => {
    for (let i = 0; i < 300; i++) {
      if (out.indexOf(text, from) >= 0) return out.length;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the app never printed ${JSON.stringify(text)}:\n${out}`);
  };
  const say = (line: string) => app?.stdin?.write(`${line}\n`);

  await waitFor('Chatting as dataset "alice"');
  say("Hi! I live in Lisbon and I work as a nurse at Santa Maria.");
  let seen = await waitFor("assistant: (fake model) You said: Hi! I live in Lisbon");
  // No rule makes a fact of this one: only the conversation keeps it.
  say("My favourite dish is bacalhau.");
  seen = await waitFor("assistant: (fake model) You said: My favourite dish is bacalhau.", seen);
  say("/end");
  seen = await waitFor("Ended thread", seen);

  // The episode and its facts are extracted in the background (the host's timers run the job).
  const memory = createMemoryClient({ baseUrl: host.url, apiKey: key });
  for (let i = 0; i < 100 && (await memory.facts.list("alice")).total === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  say("/facts");
  seen = await waitFor("- user lives_in Lisbon", seen);

  const before = host.provider.chatCalls().length;
  say("Where do I live?");
  seen = await waitFor("assistant: (fake model) You said: Where do I live?", seen);
  say("What is my favourite dish?");
  await waitFor("assistant: (fake model) You said: What is my favourite dish?", seen);
  say("/quit");
  expect(await exited).toBe(0);

  // The app's model calls for the later questions: the recalled block is a system message.
  const later = (question: string) =>
    host.provider
      .chatCalls()
      .slice(before)
      .find((c) => c.messages.at(-1)?.content === question);
  const systemOf = (question: string) =>
    (later(question)?.messages ?? [])
      .filter((m) => m.role === "system")
      .map((m) => m.content)
      .join("\n");
  expect(systemOf("Where do I live?")).toMatch(/lives in Lisbon/);
  // What no fact holds is recalled from the conversation itself.
  expect(systemOf("What is my favourite dish?")).toMatch(/# CONVERSATION[\s\S]*user: My favourite dish is bacalhau\./);
  // A new thread: the earlier conversation is not in the window, only what memory recalled.
  expect(later("Where do I live?")?.messages.filter((m) => m.role === "user")).toHaveLength(1);
  // The turns were written to the threads by the middleware.
  const threads = await memory.datasets.export("alice");
  expect(threads.threads).toHaveLength(2);
});

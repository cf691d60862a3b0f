import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createMemoryClient } from "@memory-service/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Host, startHost } from "../../packages/client/test/helpers/host";
import { startFaultProxy } from "../../packages/client/test/helpers/proxy";

/**
 * The example chat app as a user runs it (`npm start` in examples/chat, as a child process fed on
 * standard input) against the Node.js host over HTTP, with the fake OpenAI-compatible provider as
 * both the service's model (the demo provider's rules extract the facts) and the app's chat model.
 * A fact said in one thread is recalled into the prompt of an answer in a later thread; the chat
 * goes on when the memory service is down or hung, and Ctrl-C stops a reply.
 */
const DIR = fileURLToPath(new URL(".", import.meta.url));
let host: Host;
const apps: ChildProcess[] = [];

beforeAll(async () => {
  // The host's own timer doorbell: ending a thread runs its extraction, as in production.
  host = await startHost({ doorbell: "timers" });
  host.provider.onText((request) => {
    const last = request.messages.at(-1)?.content ?? "";
    return `(fake model) You said: ${last}`;
  });
});
afterAll(async () => {
  for (const app of apps) app.kill("SIGKILL");
  await host?.close();
});

/** The app as a child process: what it printed so far, a line typed into it, a wait for some text. */
function startApp(env: Record<string, string>) {
  const app = spawn(process.execPath, ["--conditions=development", "--import", "tsx", "src/main.ts"], {
    cwd: DIR,
    env: { ...process.env, OPENAI_BASE_URL: host.provider.url, OPENAI_API_KEY: "test-key", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  apps.push(app);
  let out = "";
  app.stdout?.on("data", (d) => {
    out += d;
  });
  app.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => app.once("exit", resolve));
  return {
    app,
    exited,
    output: () => out,
    say: (line: string) => app.stdin?.write(`${line}\n`),
    /** Waits until `text` is printed after `from`; resolves with the output's length then. */
    async waitFor(text: string, from = 0) {
      for (let i = 0; i < 300; i++) {
        if (out.indexOf(text, from) >= 0) return out.length;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`the app never printed ${JSON.stringify(text)}:\n${out}`);
    },
  };
}

it("remembers across threads: a fact from an earlier thread is in a later answer's prompt", async () => {
  const { key } = await host.tenant();
  const { say, waitFor, exited } = startApp({ MEMORY_URL: host.url, MEMORY_API_KEY: key, MEMORY_DATASET: "alice" });

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

it("starts and chats without memory when the service is unreachable; /facts and /end say so", async () => {
  const proxy = await startFaultProxy(host.url);
  const unreachable = proxy.url;
  await proxy.close(); // nothing listens there now
  const { say, waitFor, exited, output } = startApp({
    MEMORY_URL: unreachable,
    MEMORY_API_KEY: `mk_${"0".repeat(64)}`,
    MEMORY_DATASET: "bob",
  });
  let seen = await waitFor('Chatting as dataset "bob" without memory for now');
  say("Hello there.");
  // The thread is asked for when the model call starts (beside recall), so its failure may be
  // reported before the answer.
  const hello = seen;
  await waitFor("assistant: (fake model) You said: Hello there.", hello);
  seen = await waitFor("(memory append failed, this turn is not saved:", hello);
  say("/facts");
  seen = await waitFor("(memory unavailable, no facts to show:", seen);
  say("/end");
  seen = await waitFor("No thread to end. The next thread starts once memory answers.", seen);
  say("/quit");
  expect(await exited).toBe(0);
  expect(output()).not.toMatch(/at .*\.ts:\d+/); // no stack trace
});

it("starts the thread with the next turn once the service answers", async () => {
  const { key } = await host.tenant();
  const proxy = await startFaultProxy(host.url);
  try {
    for (let i = 0; i < 2; i++) proxy.fail("POST", "/v1/threads", { kind: "status", status: 503 });
    const { say, waitFor, exited, output } = startApp({
      MEMORY_URL: proxy.url,
      MEMORY_API_KEY: key,
      MEMORY_DATASET: "erin",
    });
    let seen = await waitFor('Chatting as dataset "erin" without memory for now (Service Unavailable (proxy))');
    say("I work in Braga.");
    seen = await waitFor("assistant: (fake model) You said: I work in Braga.", seen);
    say("/end");
    seen = await waitFor("Ended thread thr_", seen);
    say("/quit");
    expect(await exited).toBe(0);
    const ended = output().match(/Ended thread (thr_\w+)/)?.[1] as string;
    const memory = createMemoryClient({ baseUrl: host.url, apiKey: key });
    expect((await memory.threads.messages(ended)).messages.map((m) => m.content)).toEqual([
      "I work in Braga.",
      "(fake model) You said: I work in Braga.",
    ]);
  } finally {
    await proxy.close();
  }
});

it("goes on through an outage mid-chat, and /quit does not wait long for a hung service", async () => {
  const { key } = await host.tenant();
  const proxy = await startFaultProxy(host.url);
  try {
    const { say, waitFor, exited, output } = startApp({
      MEMORY_URL: proxy.url,
      MEMORY_API_KEY: key,
      MEMORY_DATASET: "carol",
    });
    let seen = await waitFor('Chatting as dataset "carol" in thread thr_');
    say("I live in Faro.");
    seen = await waitFor("assistant: (fake model) You said: I live in Faro.", seen);

    // The service fails: /facts and /end print one line each and the chat goes on.
    for (let i = 0; i < 10; i++) proxy.fail("GET", "/v1/memory/semantic/", { kind: "status", status: 503 });
    say("/facts");
    seen = await waitFor("(memory unavailable, no facts to show: Service Unavailable (proxy))", seen);
    for (let i = 0; i < 10; i++) proxy.fail("POST", "/v1/threads/", { kind: "status", status: 503 });
    say("/end");
    seen = await waitFor("(memory unavailable, the thread was not ended and stays open:", seen);
    proxy.clear();

    // Hung: the last turn's write never answers; /quit waits a few seconds, then says so.
    for (let i = 0; i < 5; i++) proxy.fail("POST", "/v1/memory/working/threads/", { kind: "delay", ms: 60_000 });
    say("One more thing.");
    seen = await waitFor("assistant: (fake model) You said: One more thing.", seen);
    const quitAt = performance.now();
    say("/quit");
    expect(await exited).toBe(0);
    expect(performance.now() - quitAt).toBeLessThan(6_000);
    expect(output().slice(seen)).toContain("(1 turn was not saved to memory: the service did not answer within 3 s)");
    expect(output()).not.toMatch(/at .*\.ts:\d+/);
  } finally {
    await proxy.close();
  }
});

it("Ctrl-C stops the reply being written: the partial reply is saved, marked aborted, and the chat goes on", async () => {
  const { key } = await host.tenant();
  host.provider.onText(() => "Once upon a time there was a very long story that went on and on and on.");
  host.provider.streamChunkDelayMs = 150;
  try {
    const { app, say, waitFor, exited, output } = startApp({
      MEMORY_URL: host.url,
      MEMORY_API_KEY: key,
      MEMORY_DATASET: "dave",
    });
    let seen = await waitFor('Chatting as dataset "dave" in thread thr_');
    const threadId = output().match(/in thread (thr_\w+)/)?.[1] as string;
    say("Tell me a story.");
    seen = await waitFor("assistant: Once upon", seen);
    app.kill("SIGINT");
    seen = await waitFor(" (stopped)\n", seen);
    say("/facts"); // the chat goes on
    seen = await waitFor("(no facts yet)", seen);
    say("/quit");
    expect(await exited).toBe(0);

    const memory = createMemoryClient({ baseUrl: host.url, apiKey: key });
    const { messages } = await memory.threads.messages(threadId, { order: "asc" });
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(messages[1].content).toMatch(/^Once upon/);
    expect(messages[1].content.length).toBeLessThan(70);
    expect(messages[1].metadata).toMatchObject({ stopReason: "aborted" });
  } finally {
    host.provider.streamChunkDelayMs = 0;
    host.provider.onText((request) => `(fake model) You said: ${request.messages.at(-1)?.content ?? ""}`);
  }
});

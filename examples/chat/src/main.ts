import { createInterface } from "node:readline/promises";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createMemoryClient } from "@memory-service/client";
import { startChat } from "./chat.js";

/**
 * `npm start -w examples/chat`: a terminal chat that remembers. Configured by environment:
 *
 *   MEMORY_URL       the memory service (default http://localhost:8787)
 *   MEMORY_API_KEY   a project's API key (required)
 *   MEMORY_DATASET   whose memory (default demo-user)
 *   OPENAI_BASE_URL  an OpenAI-compatible chat endpoint (default the demo provider, http://127.0.0.1:8788/v1;
 *                    Ollama: http://localhost:11434/v1)
 *   OPENAI_API_KEY   its key (default "demo")
 *   CHAT_MODEL       the model (default gpt-4o-mini; Ollama: e.g. llama3.2)
 *
 * Commands: /end ends the thread (memory is extracted from it), /facts lists what is known, /quit
 * (or Ctrl-C at the prompt). Ctrl-C during a reply stops it. The memory service being down or
 * slow never stops the chat: each failure is one line, and the chat goes on without memory.
 */
const env = process.env;
if (!env.MEMORY_API_KEY) {
  console.error("Set MEMORY_API_KEY to a project's API key (see examples/chat/README.md).");
  process.exit(1);
}
/** How long /quit waits for the last turns to be written to memory. */
const EXIT_WAIT_MS = 3_000;
// An interactive app: a memory call that hangs is given up after 5 s (and one retry).
const memory = createMemoryClient({
  baseUrl: env.MEMORY_URL ?? "http://localhost:8787",
  apiKey: env.MEMORY_API_KEY,
  timeoutMs: 5_000,
  retries: 1,
});
const provider = createOpenAICompatible({
  name: "chat",
  baseURL: env.OPENAI_BASE_URL ?? "http://127.0.0.1:8788/v1",
  apiKey: env.OPENAI_API_KEY ?? "demo",
});
const dataset = env.MEMORY_DATASET ?? "demo-user";
// A memory failure is printed once, below; the AI SDK would print it again as the call's warning.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
const message = (error: unknown) => (error instanceof Error ? error.message : String(error));
const chat = await startChat({
  memory,
  model: provider.chatModel(env.CHAT_MODEL ?? "gpt-4o-mini"),
  dataset,
  onMemoryError: (error, stage) =>
    console.error(
      stage === "append"
        ? `(memory append failed, this turn is not saved: ${message(error)})`
        : `(memory recall failed, answered without memory: ${message(error)})`,
    ),
});

if (chat.threadId) console.log(`Chatting as dataset "${dataset}" in thread ${chat.threadId}. /end, /facts, /quit`);
else {
  console.log(
    `Chatting as dataset "${dataset}" without memory for now (${message(chat.startError)}): ` +
      "a thread is started once the service answers. /end, /facts, /quit",
  );
}
const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: false });

// Ctrl-C stops the reply being written (its partial text is saved, marked aborted); at the prompt
// it quits. Under `npm start` the app gets each Ctrl-C twice (from the terminal and forwarded by
// npm): two within half a second are one.
let replying: AbortController | undefined;
let lastInterrupt = 0;
process.on("SIGINT", () => {
  const now = Date.now();
  if (now - lastInterrupt < 500) return;
  lastInterrupt = now;
  if (replying) replying.abort();
  else rl.close();
});

for await (const line of rl) {
  const text = line.trim();
  if (!text) continue;
  if (text === "/quit") break;
  if (text === "/end") {
    try {
      const ended = await chat.end();
      const next = chat.threadId ? `New thread ${chat.threadId}.` : "The next thread starts once memory answers.";
      console.log(
        ended ? `Ended thread ${ended}: its facts are being extracted. ${next}` : `No thread to end. ${next}`,
      );
    } catch (error) {
      console.error(`(memory unavailable, the thread was not ended and stays open: ${message(error)})`);
    }
  } else if (text === "/facts") {
    try {
      const facts = await chat.facts();
      console.log(
        facts.length ? facts.map((f) => `- ${f.subject} ${f.predicate} ${f.object}`).join("\n") : "(no facts yet)",
      );
    } catch (error) {
      console.error(`(memory unavailable, no facts to show: ${message(error)})`);
    }
  } else {
    replying = new AbortController();
    // "assistant: " with the first piece of the reply, so that a memory warning comes before it.
    let started = false;
    const write = (delta: string) => {
      process.stdout.write(started ? delta : `assistant: ${delta}`);
      started = true;
    };
    try {
      await chat.send(text, write, replying.signal);
      write(replying.signal.aborted ? " (stopped)\n" : "\n");
    } catch (error) {
      if (started) write("\n");
      console.error(`(the model failed: ${message(error)})`);
    } finally {
      replying = undefined;
    }
  }
}
rl.close();
// The last turns are written in the background: wait a little for them, never for ever.
const unsaved = await chat.close(EXIT_WAIT_MS);
if (unsaved > 0) {
  console.error(
    `(${unsaved} turn${unsaved === 1 ? " was" : "s were"} not saved to memory: the service did not answer within ${EXIT_WAIT_MS / 1000} s)`,
  );
}
process.exit(0);

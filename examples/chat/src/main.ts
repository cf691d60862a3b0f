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
 * Commands: /end ends the thread (memory is extracted from it), /facts lists what is known, /quit.
 */
const env = process.env;
if (!env.MEMORY_API_KEY) {
  console.error("Set MEMORY_API_KEY to a project's API key (see examples/chat/README.md).");
  process.exit(1);
}
const memory = createMemoryClient({ baseUrl: env.MEMORY_URL ?? "http://localhost:8787", apiKey: env.MEMORY_API_KEY });
const provider = createOpenAICompatible({
  name: "chat",
  baseURL: env.OPENAI_BASE_URL ?? "http://127.0.0.1:8788/v1",
  apiKey: env.OPENAI_API_KEY ?? "demo",
});
const dataset = env.MEMORY_DATASET ?? "demo-user";
const chat = await startChat({
  memory,
  model: provider.chatModel(env.CHAT_MODEL ?? "gpt-4o-mini"),
  dataset,
  onMemoryError: (error, stage) => console.error(`(memory ${stage} failed: ${(error as Error).message})`),
});

console.log(`Chatting as dataset "${dataset}" in thread ${chat.threadId}. /end, /facts, /quit`);
const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: false });
for await (const line of rl) {
  const text = line.trim();
  if (!text) continue;
  if (text === "/quit") break;
  if (text === "/end") {
    const ended = await chat.end();
    console.log(`Ended thread ${ended}: its facts are being extracted. New thread ${chat.threadId}.`);
  } else if (text === "/facts") {
    const facts = await chat.facts();
    console.log(
      facts.length ? facts.map((f) => `- ${f.subject} ${f.predicate} ${f.object}`).join("\n") : "(no facts yet)",
    );
  } else {
    process.stdout.write("assistant: ");
    await chat.send(text, (delta) => process.stdout.write(delta));
    process.stdout.write("\n");
  }
}
rl.close();

import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { createNodeService } from "../../../functions/node";
import { createNodeServer } from "../../../functions/node-host";
import { createApiKey } from "../../../lib/api-keys";
import { parseConfig } from "../../../lib/config";
import { createLlm } from "../../../lib/llm/client";
import { createLogger } from "../../../lib/log";
import { createProject } from "../../../lib/projects";
import { extractFacts, judge, parseTranscript, summarise } from "../../../scripts/demo-rules";
import { startFakeOpenAI } from "../../../tests/helpers/fake-openai";
import { uniqueProjectName } from "../../../tests/helpers/names";

/**
 * The server the Python client's tests (and bench.py) run against: the Node.js host as `npm
 * start` builds it (functions/server.ts: createNodeService, createNodeServer, its timer doorbell,
 * so ending a thread really runs the episode job), on an in-memory embedded database, with the
 * tests' fake OpenAI-compatible provider answering as the demo provider's rule-based "model".
 *
 * Prints one JSON line `{"url", "key", "providerUrl"}` once it listens (a fresh project and API key,
 * and the fake provider's OpenAI-compatible base URL). Then reads
 * commands on stdin, one a line, and answers each with one JSON line:
 *   `key`: a new project and API key, `{"key"}`;
 *   `chat-text <text>`: the provider's next free-text answers are <text>, `{"ok": true}`;
 *   `stream-delay <ms>`: the pause between a streamed answer's chunks, `{"ok": true}`;
 *   `fail-chat <n>`: the next n chat completions are answered 500, `{"ok": true}`;
 *   `fail-chat-midstream`: the next streamed answer dies halfway, `{"ok": true}`;
 *   `chat-latency <ms>`: how long the provider takes before each chat answer, `{"ok": true}`;
 *   `streams-closed-early`: streamed answers whose client left before the end, `{"count"}`.
 * Exits when stdin closes (the test process ended, however it ended).
 */
const provider = await startFakeOpenAI();
const userText = (messages: { role: string; content: string }[]) =>
  messages.findLast((m) => m.role === "user")?.content ?? "";
provider.onStructured("episode_summary", (r) => summarise(parseTranscript(userText(r.messages))));
provider.onStructured("fact_extraction", (r) => extractFacts(parseTranscript(userText(r.messages))));
provider.onStructured("contradiction_judgement", (r) => judge(userText(r.messages)));
let chatText = "Noted.";
provider.onText(() => chatText);
// Nobody inspects the fake's request log here: keep it from growing over a long run.
setInterval(() => {
  provider.requests.length = 0;
}, 5_000).unref();

const config = parseConfig({
  PGLITE_DIR: "memory://",
  OPENAI_BASE_URL: provider.url,
  OPENAI_API_KEY: "test-key",
  EMBEDDING_DIMENSIONS: "64",
  ADMIN_PASSWORD: "python-client-tests",
  LOG_LEVEL: process.env.LOG_LEVEL ?? "error",
});
const log = createLogger({ level: config.logLevel });
const service = await createNodeService({
  config,
  log,
  llm: createLlm(config, { maxRetries: 0, timeoutMs: 5_000 }),
  checkEmbeddings: false,
});
const server = createNodeServer({
  fetch: service.app.fetch,
  hostname: "127.0.0.1",
  keepAliveTimeoutMs: config.keepAliveTimeoutMs,
  headersTimeoutMs: config.headersTimeoutMs,
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function newKey() {
  // Project names are unique: each key gets a project of its own name.
  const project = await createProject(service.deps, { name: uniqueProjectName("python") });
  const { key } = await createApiKey({ deps: service.deps, projectId: project.id }, { name: "python-key" });
  return key;
}

console.log(JSON.stringify({ url, key: await newKey(), providerUrl: provider.url }));

const stop = async () => {
  server.closeAllConnections();
  server.close();
  await service.close();
  await provider.close();
  process.exit(0);
};
const lines = createInterface({ input: process.stdin });
lines.on("line", async (line) => {
  const [command, ...rest] = line.trim().split(" ");
  if (command === "key") console.log(JSON.stringify({ key: await newKey() }));
  else if (command === "chat-text") {
    chatText = rest.join(" ");
    console.log(JSON.stringify({ ok: true }));
  } else if (command === "stream-delay") {
    provider.streamChunkDelayMs = Number(rest[0]);
    console.log(JSON.stringify({ ok: true }));
  } else if (command === "fail-chat-midstream") {
    provider.fail({ status: 500, times: 1, endpoint: "chat", midStream: true });
    console.log(JSON.stringify({ ok: true }));
  } else if (command === "chat-latency") {
    provider.endpointLatencyMs.chat = Number(rest[0]);
    console.log(JSON.stringify({ ok: true }));
  } else if (command === "fail-chat") {
    provider.fail({ status: 500, times: Number(rest[0]), endpoint: "chat" });
    console.log(JSON.stringify({ ok: true }));
  } else if (command === "streams-closed-early") {
    console.log(JSON.stringify({ count: provider.streamsClosedEarly }));
  } else console.log(JSON.stringify({ error: `unknown command: ${command}` }));
});
lines.on("close", () => void stop());
process.on("SIGTERM", () => void stop());

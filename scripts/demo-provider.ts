import { CHAT_SYSTEM_PROMPT, COMPACTION_PROMPT, RECALL_SYNTHESIS_PROMPT } from "../lib/llm/prompts";
import { type ChatRequest, startFakeOpenAI } from "../tests/helpers/fake-openai";
import { chatRequestLine, extractFacts, judge, parseTranscript, summarise } from "./demo-rules";

/**
 * `npm run demo:provider`: an OpenAI-compatible server that needs no model, for trying the
 * service out (the README's quick start). It is the tests' fake provider (deterministic hashed
 * bag-of-words embeddings, any `dimensions`) answering with the rule-based "model" of
 * scripts/demo-rules.ts. Listens on 127.0.0.1:8788, or DEMO_PROVIDER_PORT.
 */
const port = Number(process.env.DEMO_PROVIDER_PORT ?? 8788);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`DEMO_PROVIDER_PORT must be a port number (got ${process.env.DEMO_PROVIDER_PORT})`);
  process.exit(1);
}

const fake = await startFakeOpenAI({ port }).catch((err: NodeJS.ErrnoException) => {
  console.error(
    err.code === "EADDRINUSE"
      ? `Port ${port} is in use: set DEMO_PROVIDER_PORT to a free one (and use it in OPENAI_BASE_URL)`
      : `Could not start the demo provider: ${err.message}`,
  );
  process.exit(1);
});

const userText = (request: ChatRequest) => request.messages.findLast((m) => m.role === "user")?.content ?? "";
const systemText = (request: ChatRequest) => request.messages.find((m) => m.role === "system")?.content ?? "";

fake.onStructured("episode_summary", (request) => summarise(parseTranscript(userText(request))));
fake.onStructured("fact_extraction", (request) => extractFacts(parseTranscript(userText(request))));
fake.onStructured("contradiction_judgement", (request) => judge(userText(request)));
fake.onText((request) => {
  const system = systemText(request);
  const text = userText(request);
  if (system === RECALL_SYNTHESIS_PROMPT) {
    const facts = [...text.matchAll(/^- (.*) \(valid: [^)]*\)$/gm)].map((m) => m[1]);
    return facts.length > 0 ? `Known about the user: ${facts.join("; ")}.` : "Nothing is known about the user yet.";
  }
  if (system === COMPACTION_PROMPT) {
    const { summary } = summarise(parseTranscript(text));
    return summary;
  }
  // A chat turn: one line with what recall put in its system block (the example app's "watch the requests").
  console.log(chatRequestLine(CHAT_SYSTEM_PROMPT, system, text));
  const said = text.replace(/\s+/g, " ").trim();
  return `(demo provider, no model) You said: "${said.length > 200 ? `${said.slice(0, 197)}...` : said}"`;
});

// A long-running demo: the fake keeps every request for tests to inspect; here nobody does.
setInterval(() => {
  fake.requests.length = 0;
}, 10_000).unref();

// One write, so whoever reads the pipe for "listening on" has the whole banner in the same chunk.
console.log(
  [
    `Demo provider (rule-based, no model) listening on ${fake.url}`,
    "Point the service at it, in another terminal:",
    `  OPENAI_BASE_URL=${fake.url} npm start`,
  ].join("\n"),
);

const stop = () => {
  fake.close().then(() => process.exit(0));
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);

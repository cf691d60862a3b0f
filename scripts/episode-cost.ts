import { sql } from "drizzle-orm";
import { benchService } from "../bench/lib";
import { rowsOf } from "../lib/db/rows";
import { type ChatRequest, startFakeOpenAI } from "../tests/helpers/fake-openai";
import { extractFacts, judge, parseTranscript, summarise } from "./demo-rules";

/**
 * What one episode costs in tokens, as the demo provider counts them (the tests' fake provider,
 * about 4 characters a token, answering with scripts/demo-rules.ts): `node --import tsx
 * scripts/episode-cost.ts [conversations]` runs that many 10-message conversations (5 users, 2
 * threads each by default) through the service, ends each one, lets the background work run and
 * prints the usage ledger per episode (GET /v1/usage grouped by operation). docs/operations.md
 * quotes it; it is a measurement, not a test.
 */
const conversations = Number(process.argv[2] ?? 10);

const USER_LINES = [
  "Hi! My name is Ana and I moved to Lisbon last spring.",
  "I work as a nurse at Santa Maria hospital.",
  "I'm allergic to peanuts, so I check every menu twice.",
  "I really like jazz, especially live sets on Friday nights.",
  "I prefer tea in the morning and coffee after lunch.",
  "I live in Porto now, near the river.",
  "I work at Initech since last year.",
  "I love hiking in the mountains with my dog.",
  "I hate crowded trains on Monday mornings.",
  "I'm from Braga originally.",
];
const ASSISTANT_LINES = [
  "Nice to meet you! How can I help today?",
  "That sounds demanding; do you work night shifts?",
  "Good to know, I will keep that in mind for recipes.",
  "Jazz is a great choice. Any favourite musicians?",
  "Noted. Anything else you would like me to remember?",
];

const userOf = (request: ChatRequest) => request.messages.findLast((m) => m.role === "user")?.content ?? "";
const fake = await startFakeOpenAI();
fake.onStructured("episode_summary", (request) => summarise(parseTranscript(userOf(request))));
fake.onStructured("fact_extraction", (request) => extractFacts(parseTranscript(userOf(request))));
fake.onStructured("contradiction_judgement", (request) => judge(userOf(request)));

const bench = await benchService({ OPENAI_API_KEY: "demo", OPENAI_BASE_URL: fake.url });
try {
  const threads: string[] = [];
  for (let c = 0; c < conversations; c++) {
    const thread = await bench.call("POST", "/v1/threads", { dataset: `user-${c % 5}` });
    threads.push(thread.threadId as string);
    for (let m = 0; m < 10; m++) {
      const content = m % 2 === 0 ? USER_LINES[(c * 3 + m / 2) % USER_LINES.length] : ASSISTANT_LINES[(m - 1) / 2];
      await bench.call("POST", `/v1/memory/working/threads/${thread.threadId}/messages`, {
        role: m % 2 === 0 ? "user" : "assistant",
        content,
      });
    }
    // One conversation after the other, so later ones meet the facts of earlier ones (the judge).
    await bench.call("POST", `/v1/threads/${thread.threadId}/end`);
    for (;;) {
      const [row] = rowsOf<{ waiting: number }>(
        await bench.service.deps.db.execute(
          sql`SELECT count(*)::int AS waiting FROM episodes
              WHERE status IN ('pending', 'processing') OR semantic_status IN ('pending', 'processing')`,
        ),
      );
      if (Number(row.waiting) === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const [{ n }] = rowsOf<{ n: number }>(
    await bench.service.deps.db.execute(sql`SELECT count(*)::int AS n FROM episodes WHERE status = 'completed'`),
  );
  const episodes = Number(n);
  const usage = (await bench.call("GET", "/v1/usage?groupBy=operation")) as {
    groups: { key: string; calls: number; inputTokens: number; outputTokens: number; totalTokens: number }[];
    total: { calls: number; totalTokens: number; unknownCalls: number };
  };
  const per = (x: number) => (x / episodes).toFixed(1);
  console.log(`${episodes} episodes of 10 messages (5 user, 5 assistant), demo provider's counts, per episode:`);
  console.log("| operation | calls | input tokens | output tokens | total tokens |");
  console.log("|---|---:|---:|---:|---:|");
  for (const g of usage.groups) {
    console.log(
      `| ${g.key} | ${per(g.calls)} | ${per(g.inputTokens)} | ${per(g.outputTokens)} | ${per(g.totalTokens)} |`,
    );
  }
  console.log(`| all | ${per(usage.total.calls)} | | | ${per(usage.total.totalTokens)} |`);
  console.log(`unknown calls: ${usage.total.unknownCalls}; provider requests: ${fake.requests.length}`);
} finally {
  await bench.close();
  await fake.close();
}

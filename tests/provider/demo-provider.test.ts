import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../lib/config";
import { createLlm, type Llm } from "../../lib/llm/client";
import {
  CHAT_SYSTEM_PROMPT,
  CONTRADICTION_JUDGE_PROMPT,
  ContradictionJudgeSchema,
  EPISODE_SUMMARY_PROMPT,
  EpisodeSummarySchema,
  FACT_EXTRACTION_PROMPT,
  FactExtractionSchema,
  RECALL_SYNTHESIS_PROMPT,
} from "../../lib/llm/prompts";
import { chatRequestLine, extractFacts, judge, parseTranscript, summarise } from "../../scripts/demo-rules";
import { freePort } from "../helpers/process";

/**
 * `npm run demo:provider` (scripts/demo-provider.ts): its rules on their own, then the script
 * itself over HTTP through the service's own client, which validates every answer with the
 * schemas the service uses.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

const transcript = [
  "[1] user: Hi! My name is Ana and I moved to Lisbon last spring.",
  "[2] assistant: Welcome! I love Lisbon too. I work as a guide.",
  "[3] user: I work as a nurse at Santa Maria hospital. I'm allergic to peanuts, and I really like jazz.",
  "[4] user: I live in Rio de Janeiro now? No, kidding. I prefer tea.",
].join("\n");

const FACTS_BLOCK =
  "Known facts about the user, most relevant first.\n# FACTS (format: fact (valid: from - to))\n- user lives in Lisbon (valid: 2026-01-02 - present)";

describe("the demo provider's rules", () => {
  it("a chat turn's log line: what the user said and the system block after the chat prompt, on one line", () => {
    expect(chatRequestLine(CHAT_SYSTEM_PROMPT, `${CHAT_SYSTEM_PROMPT}\n\n${FACTS_BLOCK}`, "Where do I\nlive?")).toBe(
      'chat: user said "Where do I ⏎ live?"; system block: Known facts about the user, most relevant first. ⏎ # FACTS (format: fact (valid: from - to)) ⏎ - user lives in Lisbon (valid: 2026-01-02 - present)',
    );
    expect(chatRequestLine(CHAT_SYSTEM_PROMPT, CHAT_SYSTEM_PROMPT, "Hello")).toBe(
      'chat: user said "Hello"; system block: (nothing recalled)',
    );
    expect(chatRequestLine(CHAT_SYSTEM_PROMPT, CHAT_SYSTEM_PROMPT, "x".repeat(300))).toMatch(/"x{117}\.\.\."/);
  });

  it("extracts the user's facts, quoting the user's sentence, and none from the assistant", () => {
    const result = FactExtractionSchema.parse(extractFacts(parseTranscript(transcript)));
    const facts = result.facts.map((f) => [f.predicate, f.object, f.objectIsEntity]);
    expect(facts).toEqual([
      ["is_named", "Ana", true],
      ["lives_in", "Lisbon", true],
      ["works_as", "nurse", false],
      ["works_at", "Santa Maria", true],
      ["allergic_to", "peanuts", false],
      ["likes", "jazz", false],
      ["lives_in", "Rio de Janeiro", true],
      ["prefers", "tea", false],
    ]);
    for (const f of result.facts) {
      expect(f).toMatchObject({ subject: "user", confidence: 0.9, validAt: null });
      // Verbatim from a user line: the service drops a fact whose quote the user did not say.
      const said = parseTranscript(transcript).filter((l) => l.role === "user");
      expect(said.some((l) => l.text.includes(f.sourceQuote))).toBe(true);
    }
    expect(result.facts[1].sourceQuote).toBe("My name is Ana and I moved to Lisbon last spring.");
    expect(result.entities).toEqual([
      { name: "Ana", type: "PERSON" },
      { name: "Lisbon", type: "PLACE" },
      { name: "Santa Maria", type: "ORG" },
      { name: "Rio de Janeiro", type: "PLACE" },
    ]);
  });

  it("summarises what the user said, with the facts as key learnings", () => {
    const result = EpisodeSummarySchema.parse(summarise(parseTranscript(transcript)));
    expect(result.summary).toContain('The user said: "Hi! My name is Ana and I moved to Lisbon last spring."');
    expect(result.summary).not.toContain("guide");
    expect(result.keyLearnings).toContain("The user works as a nurse.");
    expect(result.keyLearnings).toContain("The user is allergic to peanuts.");
  });

  it("judges a new value of a one-value predicate as contradicting the old one", () => {
    const pairs = [
      "Pair 1:\nOLD: user lives_in Lisbon\nNEW: user lives_in Porto",
      "Pair 2:\nOLD: user likes jazz\nNEW: user likes tea",
      "Pair 3:\nOLD: user works_at Santa Maria\nNEW: user works_at santa maria",
      "Pair 4:\nOLD: user works_as nurse\nNEW: user lives_in Porto",
    ].join("\n\n");
    expect(ContradictionJudgeSchema.parse(judge(pairs)).judgements).toEqual([
      { pair: 1, contradicts: true },
      { pair: 2, contradicts: false },
      { pair: 3, contradicts: false },
      { pair: 4, contradicts: false },
    ]);
  });
});

describe("npm run demo:provider", { timeout: 30_000 }, () => {
  let child: ChildProcess;
  let output = "";
  let llm: Llm;
  let url: string;

  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}/v1`;
    // The script itself, as the npm script runs it (node with tsx as a loader, no npm parent).
    child = spawn(process.execPath, ["--import", "tsx", "scripts/demo-provider.ts"], {
      cwd: ROOT,
      env: { ...process.env, DEMO_PROVIDER_PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.on("data", (d) => {
      output += d;
    });
    child.stderr?.on("data", (d) => {
      output += d;
    });
    const deadline = Date.now() + 20_000;
    while (!output.includes(`listening on ${url}`)) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`demo provider did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // No key: with a base URL the service needs none.
    const config = parseConfig({ OPENAI_BASE_URL: url, EMBEDDING_DIMENSIONS: "64" });
    llm = createLlm(config, { maxRetries: 0, timeoutMs: 5000 });
  });
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
  });

  it("prints how to point the service at it", () => {
    expect(output).toContain(`OPENAI_BASE_URL=${url} npm start`);
  });

  it("answers the service's structured calls in the shapes it validates", async () => {
    const summary = await llm.structured({
      name: "episode_summary",
      schema: EpisodeSummarySchema,
      system: EPISODE_SUMMARY_PROMPT,
      user: transcript,
    });
    expect(summary.keyLearnings).toContain("The user lives in Lisbon.");
    const facts = await llm.structured({
      name: "fact_extraction",
      schema: FactExtractionSchema,
      system: FACT_EXTRACTION_PROMPT,
      user: transcript,
    });
    expect(facts.facts.map((f) => f.object)).toContain("Lisbon");
    const judged = await llm.structured({
      name: "contradiction_judgement",
      schema: ContradictionJudgeSchema,
      system: CONTRADICTION_JUDGE_PROMPT,
      user: "Pair 1:\nOLD: user lives_in Lisbon\nNEW: user lives_in Porto",
    });
    expect(judged.judgements).toEqual([{ pair: 1, contradicts: true }]);
  });

  it("embeds at the configured size and answers plain calls with a short text", async () => {
    const vectors = await llm.embed(["user lives_in Lisbon", "Where does the user live?"]);
    expect(vectors.map((v) => v.length)).toEqual([64, 64]);
    const reply = await llm.complete({ system: CHAT_SYSTEM_PROMPT, messages: [{ role: "user", content: "Hello" }] });
    expect(reply.text).toBe('(demo provider, no model) You said: "Hello"');
    const synthesis = await llm.complete({
      system: RECALL_SYNTHESIS_PROMPT,
      messages: [
        {
          role: "user",
          content: "# FACTS (format: fact (valid: from - to))\n- user lives in Lisbon (valid: 2026-01-02 - present)",
        },
      ],
    });
    expect(synthesis.text).toBe("Known about the user: user lives in Lisbon.");
  });

  it("prints one line per chat turn with its system block, none for other calls", async () => {
    const before = output.length;
    await llm.complete({
      system: `${CHAT_SYSTEM_PROMPT}\n\n${FACTS_BLOCK}`,
      messages: [{ role: "user", content: "Where do I live?" }],
    });
    await llm.complete({ system: RECALL_SYNTHESIS_PROMPT, messages: [{ role: "user", content: FACTS_BLOCK }] });
    const deadline = Date.now() + 5_000;
    while (!output.slice(before).includes("\n") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(output.slice(before).trim().split("\n")).toEqual([
      'chat: user said "Where do I live?"; system block: Known facts about the user, most relevant first. ⏎ # FACTS (format: fact (valid: from - to)) ⏎ - user lives in Lisbon (valid: 2026-01-02 - present)',
    ]);
  });
});

import { createHash } from "node:crypto";
import { countTokens } from "gpt-tokenizer";
import { DEFAULT_SETTINGS } from "../../lib/settings/settings";
import { bm25Index } from "./bm25";
import type { Embedder } from "./embedder";
import { type Fixture, QUESTION_KINDS, type Question } from "./fixture";
import { cosine, firstGoldRank, type Outcome, percentile, rankByScore, rrf, scoreByKind } from "./metrics";
import type { QualityService } from "./service";

/** The longer list every system is scored on (hit@30, MRR). */
export const LONG_LIST = 30;
/** The default block: the project's factsInContext. */
export const BLOCK = DEFAULT_SETTINGS.semantic.factsInContext;

interface ExportedFact {
  factId: string;
  predicate: string;
  object: string;
  sourceQuote: string;
  confidence: number;
  invalidAt: string | null;
}

interface RecalledFact {
  predicate: string;
  object: string;
  relevanceScore: number;
}

export interface StoredFact {
  /** The fixture's id when the fact is a gold fact (it always should be), else the service's. */
  id: string;
  dataset: string;
  text: string;
  keywordText: string;
}

const key = (dataset: string, predicate: string, object: string) => `${dataset}\u0000${predicate}\u0000${object}`;

/** Fixture fact id by dataset, predicate and object (unique per user by construction). */
export function goldIndex(fixture: Fixture) {
  return new Map(fixture.users.flatMap((u) => u.facts.map((f) => [key(u.dataset, f.predicate, f.object), f.id])));
}

/**
 * The stored facts of every dataset, read back through the export route: `live` are the ones a
 * recall can return (not invalidated, confident enough), the candidate set of the baselines.
 */
export async function readStoredFacts(q: QualityService, fixture: Fixture) {
  const ids = goldIndex(fixture);
  const all: (StoredFact & { live: boolean })[] = [];
  for (const user of fixture.users) {
    const exported = (await q.call("GET", `/v1/memory/recall/datasets/${user.dataset}/export`)) as {
      facts: ExportedFact[];
    };
    for (const f of exported.facts) {
      all.push({
        id: ids.get(key(user.dataset, f.predicate, f.object)) ?? f.factId,
        dataset: user.dataset,
        text: `user ${f.predicate} ${f.object}`,
        keywordText: `${f.predicate} ${f.object} ${f.sourceQuote}`,
        live: f.invalidAt === null && f.confidence >= DEFAULT_SETTINGS.semantic.retrievalMinConfidence,
      });
    }
  }
  // In an order fixed by the ids but unrelated to them, so that the baselines break score ties
  // alike in every run (the export's order among facts written in one statement is not fixed)
  // and without favouring the facts the generator made first.
  const order = (id: string) => createHash("sha256").update(id).digest("hex");
  all.sort((a, b) => order(a.id).localeCompare(order(b.id)));
  return { all, live: all.filter((f) => f.live) };
}

/** The gold ids of a recall response's facts, by score (the response groups them for rendering). */
function rankedIds(dataset: string, facts: RecalledFact[], ids: Map<string, string>): string[] {
  const ordered = facts.map((f, i) => ({ f, i })).sort((a, b) => b.f.relevanceScore - a.f.relevanceScore || a.i - b.i);
  return ordered.map(({ f }) => ids.get(key(dataset, f.predicate, f.object)) ?? `?${f.predicate}:${f.object}`);
}

export interface RecallRun {
  /** In the questions' order. */
  outcomes: (Outcome & { question: string })[];
  tokens: number[];
  latenciesMs: number[];
  /** Per block size of messages (MESSAGE_BLOCKS): evidence in the block and its tokens, per question. */
  evidence: Record<number, { inBlock: boolean[]; tokens: number[] }>;
}

/** The message counts measured beside the facts: fewer, and the default (messagesInContext). */
export const MESSAGE_BLOCKS = [2, 4, DEFAULT_SETTINGS.semantic.messagesInContext];

interface RecalledMessage {
  content: string;
}

/** The quotes of a question's gold facts: a message holding one is an evidence turn (the fixture says each in a turn of its own). */
export function goldQuotes(fixture: Fixture) {
  return new Map(fixture.users.flatMap((u) => u.facts.map((f) => [f.id, f.sourceQuote])));
}

/** Evidence in the block: a gold fact among its facts, or an evidence turn among its messages. */
export function evidenceInBlock(
  factIds: string[],
  messages: RecalledMessage[],
  gold: string[],
  quotes: Map<string, string>,
): boolean {
  if (firstGoldRank(factIds, gold) !== null) return true;
  const wanted = gold.map((id) => quotes.get(id)).filter((q): q is string => q !== undefined);
  return messages.some((m) => wanted.some((q) => m.content.includes(q)));
}

/**
 * Every question through POST /v1/memory/recall: a 30-fact call (its order gives hit@1, hit@30
 * and MRR; it also puts the query's vector in the service's cache), then the default call, timed
 * (so its latency is the service's own, embedding cached), whose block gives hit@8 and tokens.
 * With `longOnly` (the sweep) only the 30-fact call, and hit@8 is its rank <= 8.
 */
export async function runRecall(q: QualityService, fixture: Fixture, questions: Question[], longOnly = false) {
  const ids = goldIndex(fixture);
  const quotes = goldQuotes(fixture);
  const run: RecallRun = {
    outcomes: [],
    tokens: [],
    latenciesMs: [],
    evidence: Object.fromEntries(MESSAGE_BLOCKS.map((n) => [n, { inBlock: [], tokens: [] }])),
  };
  for (const question of questions) {
    const body = { dataset: question.dataset, query: question.query, include: ["raw"] };
    const long = (await q.call("POST", "/v1/memory/recall", { ...body, limit: LONG_LIST })) as {
      facts: RecalledFact[];
    };
    const rank = firstGoldRank(rankedIds(question.dataset, long.facts, ids), question.gold);
    if (longOnly) {
      run.outcomes.push({ question: question.id, kind: question.kind, rank, inBlock: rank !== null && rank <= BLOCK });
      continue;
    }
    const started = performance.now();
    const block = (await q.call("POST", "/v1/memory/recall", body)) as { context: string; facts: RecalledFact[] };
    run.latenciesMs.push(performance.now() - started);
    const inBlock = firstGoldRank(rankedIds(question.dataset, block.facts, ids), question.gold) !== null;
    run.outcomes.push({ question: question.id, kind: question.kind, rank, inBlock });
    run.tokens.push(countTokens(block.context));
    for (const messageLimit of MESSAGE_BLOCKS) {
      const withMessages = (await q.call("POST", "/v1/memory/recall", {
        ...body,
        include: ["raw", "messages"],
        messageLimit,
      })) as { context: string; facts: RecalledFact[]; messages: RecalledMessage[] };
      const factIds = rankedIds(question.dataset, withMessages.facts, ids);
      run.evidence[messageLimit].inBlock.push(evidenceInBlock(factIds, withMessages.messages, question.gold, quotes));
      run.evidence[messageLimit].tokens.push(countTokens(withMessages.context));
    }
  }
  return run;
}

/**
 * The offline baselines on the same stored facts: cosine between the model's vectors of the
 * query and of each fact's text (the text the service embeds), Okapi BM25 over predicate, object
 * and quote (matching facts only), and their reciprocal rank fusion (k = 60). Ranks past 30
 * count as misses.
 */
export async function runBaselines(questions: Question[], live: StoredFact[], embedder: Embedder) {
  const byDataset = new Map<string, StoredFact[]>();
  for (const f of live) byDataset.set(f.dataset, [...(byDataset.get(f.dataset) ?? []), f]);
  const indexes = new Map(
    [...byDataset].map(([dataset, facts]) => [dataset, bm25Index(facts.map((f) => f.keywordText))]),
  );
  const outcomes = { dense: [] as Outcome[], bm25: [] as Outcome[], rrf: [] as Outcome[] };
  for (const question of questions) {
    const facts = byDataset.get(question.dataset) ?? [];
    const ids = facts.map((f) => f.id);
    const [queryVector, ...factVectors] = await embedder.embed([question.query, ...facts.map((f) => f.text)]);
    const dense = rankByScore(
      ids,
      factVectors.map((v) => cosine(queryVector, v)),
    );
    // A keyword search returns the documents that match, not the rest in some order.
    const bm25 = indexes.get(question.dataset)?.score(question.query) ?? [];
    const matching = new Set(ids.filter((_, i) => (bm25[i] ?? 0) > 0));
    const keyword = rankByScore(ids, bm25).filter((id) => matching.has(id));
    const lists = { dense, bm25: keyword, rrf: rrf([dense, keyword]) };
    for (const [name, list] of Object.entries(lists) as [keyof typeof outcomes, string[]][]) {
      const rank = firstGoldRank(list.slice(0, LONG_LIST), question.gold);
      outcomes[name].push({ kind: question.kind, rank, inBlock: rank !== null && rank <= BLOCK });
    }
  }
  return {
    dense: scoreByKind(outcomes.dense, QUESTION_KINDS),
    bm25: scoreByKind(outcomes.bm25, QUESTION_KINDS),
    rrf: scoreByKind(outcomes.rrf, QUESTION_KINDS),
  };
}

/** Questions whose gold evidence is among `facts`: the best any system could do on them. */
export function ceiling(questions: Question[], facts: StoredFact[]) {
  const held = new Set(facts.map((f) => f.id));
  const outcomes = questions.map((q) => {
    const there = q.gold.some((g) => held.has(g));
    return { kind: q.kind, rank: there ? 1 : null, inBlock: there };
  });
  return scoreByKind(outcomes, QUESTION_KINDS);
}

export function summariseRecall(run: RecallRun) {
  const tokens = [...run.tokens].sort((a, b) => a - b);
  const latencies = [...run.latenciesMs].sort((a, b) => a - b);
  return {
    ...scoreByKind(run.outcomes, QUESTION_KINDS),
    tokens: { median: percentile(tokens, 50), max: tokens.at(-1) ?? 0 },
    latencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
    /** Per message count: the share of questions with evidence in the block, and the block's tokens. */
    evidence: MESSAGE_BLOCKS.map((messages) => {
      const { inBlock, tokens: t } = run.evidence[messages];
      const sorted = [...t].sort((a, b) => a - b);
      return {
        messages,
        inBlock: inBlock.filter(Boolean).length / Math.max(inBlock.length, 1),
        tokens: {
          mean: t.reduce((a, b) => a + b, 0) / Math.max(t.length, 1),
          median: percentile(sorted, 50),
          max: sorted.at(-1) ?? 0,
        },
      };
    }),
    /** Each question's rank in the 30-fact list and whether its gold was in the block. */
    questions: run.outcomes.map(({ question, rank, inBlock }) => ({ question, rank, inBlock })),
  };
}

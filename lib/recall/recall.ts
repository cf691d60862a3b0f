import { embeddingsConfigured } from "../config";
import type { ReadContext } from "../context";
import type { Deps } from "../deps";
import { rethrowRefusal } from "../errors";
import { isInputRefusal } from "../llm/client";
import { RECALL_SYNTHESIS_PROMPT } from "../llm/prompts";
import { EMBED_HEAD_CHARS } from "../llm/refused-inputs";
import { errorFields } from "../log";
import { annotateSpan } from "../telemetry";
import { headOf, oneLine } from "../text";
import { type UsageCollector, usageCollector } from "../usage/collector";
import { deferUsage, readUsageCteOf } from "../usage/sql";
import { factText, groupFacts, renderContext, touchedEntities } from "./context";
import { blockMessages, type MessageSignals, type RetrievedMessage } from "./messages";
import { type RerankOutcome, rerankCandidates } from "./rerank";
import { type RankingMode, type Retrieved, type RetrievedFact, retrieve, type Signals } from "./retrieve";
import { timeRangeOf } from "./time-range";

/**
 * What a recall that could read nothing answers with (the spec's 500 message of POST
 * /v1/memory/recall, declared by functions/recall.ts; the MCP recall tools say the same).
 */
export const RECALL_FAILURE = "Failed to recall memory";

export type RecallInclude = "episodes" | "synthesis" | "raw" | "messages";

export interface RecallRequest {
  dataset: string;
  query?: string;
  include: RecallInclude[];
  limit?: number;
  /** With `include: ["messages"]`: messages in the block; default the project's messagesInContext. */
  messageLimit?: number;
  minConfidence?: number;
  asOf?: Date;
}

/** A duration for the `Server-Timing` header. */
export interface Timing {
  name: "embedding" | "sql" | "rerank" | "synthesis";
  ms: number;
  description?: string;
}

/**
 * How the facts were ranked, for the dashboard's playground (recall computes it anyway): the
 * mode, each returned fact's signals and fused score, what the reranker did, and whether the
 * project exists.
 */
export interface RecallExplanation {
  mode: RankingMode;
  /** One entry per fact, in rank order. */
  signals: (Signals & { factId: string; fused: number })[];
  /** One entry per message of the response, in its order (empty without messages). */
  messageSignals: (MessageSignals & { messageId: string; fused: number })[];
  rerank: RerankOutcome | null;
  projectFound: boolean;
}

/**
 * The read path chat apps call before every model turn: at most one embedding call (none when
 * the query's vector is cached, none without a query), one SQL statement for facts and episodes
 * together, a reranker call when the project turned it on, and a model call only for
 * `synthesis`. Each part degrades on its own (spec rule 6): no embedding, keyword plus recency;
 * no reranker, the fused order; no facts, an empty block; no episodes, null; no synthesis (or the
 * project's monthly token budget spent), null. Only when no data could be read at all does the
 * request fail. The query embedding is recorded in the ledger by the statement; the reranker's
 * and synthesis' calls, made after it, by a later request's statement (lib/usage/backlog.ts).
 */
export async function recall({ deps, projectId, ledgerProjectId, tenant }: ReadContext, request: RecallRequest) {
  const timings: Timing[] = [];
  const include = new Set(request.include);
  const query = request.query?.trim() ? request.query : undefined;
  const usage = usageCollector();
  const scope = { projectId: ledgerProjectId ?? projectId, dataset: request.dataset };

  // With asOf too: the vector signal ranks the facts valid then (a departure from the spec's
  // rule 3, which dropped it; see docs/api-notes.md, "Recall ranking").
  const asker = tenant ?? (typeof projectId === "string" ? projectId : undefined);
  const vector = query !== undefined ? await embedQuery(deps, query, asker, timings, usage) : undefined;
  const mode: RankingMode = !query ? "recent" : vector ? "hybrid" : "keyword";

  const started = performance.now();
  const retrieved = await retrieveDegrading(deps, {
    projectId,
    dataset: request.dataset,
    mode,
    query,
    vector,
    asOf: request.asOf,
    time: timeRangeOf(query, request.asOf ?? deps.clock.now()),
    limit: request.limit,
    minConfidence: request.minConfidence,
    facts: true,
    episodes: include.has("episodes"),
    messages: include.has("messages"),
    messageLimit: request.messageLimit,
    usage: readUsageCteOf(usage, scope, deps.clock.now().toISOString()),
    budget: include.has("synthesis"),
  });
  timings.push({ name: "sql", ms: performance.now() - started });

  const reranked = await rerankIfOn(deps, query, retrieved, timings, usage);
  const facts = reranked.facts;
  const groups = groupFacts(facts);
  const messages = retrieved.messages
    ? blockMessages(retrieved.messages, facts, retrieved.quoteSources, retrieved.settings?.messageLimit ?? 0)
    : null;
  const context = renderContext(groups, touchedEntities(facts), messages ?? []);
  // The search_memory span's count (GenAI conventions), when tracing is on.
  annotateSpan({ "gen_ai.memory.record.count": facts.length });
  // Not while the project's monthly token budget is spent (null, as when synthesis fails).
  const synthesise = include.has("synthesis") && context && !retrieved.budgetSpent;
  const synthesis = synthesise ? await synthesisOf(deps, context, query, timings, usage) : null;
  // The reranker's and synthesis' calls (made only when the project was read): carried by a later
  // statement, off the response's path.
  if (retrieved.settings)
    deferUsage(deps, usage, { projectId: retrieved.settings.projectId, dataset: request.dataset });

  const raw = include.has("raw");
  return {
    body: {
      context,
      factCount: facts.length,
      synthesis,
      facts: raw ? facts.map(factOfRecall) : null,
      groups: raw ? groups : null,
      episodes: include.has("episodes") ? retrieved.episodes : null,
      messages: include.has("messages") ? (messages ?? []).map(messageOfRecall) : null,
    },
    timings,
    explanation: explanationOf(mode, facts, messages ?? [], reranked.outcome, retrieved.settings !== null),
  };
}

/** How the facts and messages were ranked, for the dashboard's playground. */
function explanationOf(
  mode: RankingMode,
  facts: RetrievedFact[],
  messages: RetrievedMessage[],
  rerank: RerankOutcome | null,
  projectFound: boolean,
): RecallExplanation {
  return {
    mode,
    signals: facts.map((f) => ({ factId: f.factId, ...f.signals, fused: f.relevanceScore })),
    messageSignals: messages.map((m) => ({ messageId: m.messageId, ...m.signals, fused: m.relevanceScore })),
    rerank,
    projectFound,
  };
}

/** The spec's Fact: what recall knows beyond it (group, rank, entities, signals) left out. */
function factOfRecall({ groupName: _g, rank: _r, entities: _e, signals: _s, ...fact }: RetrievedFact) {
  return fact;
}

/** The API's message: its signals (the playground shows them) and place in its thread left out. */
function messageOfRecall({ signals: _s, seq: _q, ...message }: RetrievedMessage) {
  return message;
}

/**
 * The reranker, when the project turned it on and there is a query: it reorders the fused top
 * candidates (the statement fetched max(limit, rerankCandidates)); a spent budget, a timeout or
 * a failure keeps the fused order (logged by rerankCandidates, reported in Server-Timing and the playground). Either
 * way the block keeps the best `limit`, ranks renumbered from 1.
 */
async function rerankIfOn(
  deps: Deps,
  query: string | undefined,
  retrieved: Retrieved,
  timings: Timing[],
  usage: UsageCollector,
): Promise<{ facts: RetrievedFact[]; outcome: RerankOutcome | null }> {
  const all = retrieved.facts ?? [];
  const settings = retrieved.settings;
  if (!settings?.rerank || !query || all.length < 2)
    return { facts: all.slice(0, settings?.limit ?? all.length), outcome: null };
  // A model call like synthesis: not while the project's monthly token budget is spent.
  if (retrieved.budgetSpent) {
    timings.push({ name: "rerank", ms: 0, description: "skipped" });
    return { facts: all.slice(0, settings.limit), outcome: "skipped" };
  }
  const pool = all.slice(0, settings.rerankCandidates);
  const result = await rerankCandidates(deps, {
    query,
    candidates: pool.map((f) => ({ id: f.factId, text: rerankText(f) })),
    timeoutMs: settings.rerankTimeoutMs,
    meter: usage.meter("recall_rerank"),
  });
  timings.push({ name: "rerank", ms: result.ms, description: result.outcome });
  const byId = new Map(pool.map((f) => [f.factId, f]));
  const order = result.order ? result.order.map((id) => byId.get(id)).filter((f) => f !== undefined) : pool;
  // The pool's scores, best first, follow the new order: a client sorting by relevanceScore (and
  // the groups, by their best fact's) keeps the reranker's order rather than undoing it.
  const scores = pool.map((f) => f.relevanceScore).sort((a, b) => b - a);
  const rescored = order.map((f, i) => ({ ...f, relevanceScore: scores[i] }));
  const facts = [...rescored, ...all.slice(pool.length)]
    .slice(0, settings.limit)
    .map((f, i) => ({ ...f, rank: i + 1 }));
  return { facts, outcome: result.outcome };
}

/** What the reranker reads of a fact: what it says, then the user's own words. */
const rerankText = (f: RetrievedFact) => `${factText(f)} (said: "${oneLine(f.sourceQuote)}")`;

async function embedQuery(
  deps: Deps,
  text: string,
  tenant: string | undefined,
  timings: Timing[],
  usage: UsageCollector,
): Promise<number[] | undefined> {
  // No embedding endpoint at all: nothing is asked of a provider, so the key's check need not go
  // first on its own (lib/auth.ts) and rides with the keyword statement, one round trip on Neon
  // as for a cached query (issue 34). The start-up check already warned once that none is set.
  if (!embeddingsConfigured(deps.config)) {
    timings.push({ name: "embedding", ms: 0, description: "not configured" });
    return undefined;
  }
  // Kept per tenant (lib/llm/query-embeddings.ts); a caller of no known tenant keeps nothing.
  const key = tenant
    ? { tenant, model: deps.config.openai.embeddingModel, dimensions: deps.config.openai.embeddingDimensions, text }
    : undefined;
  const cached = key && deps.queryEmbeddings.get(key);
  if (cached) {
    timings.push({ name: "embedding", ms: 0, description: "cached" });
    return cached;
  }
  const started = performance.now();
  const embedOne = async (input: string) =>
    (
      await deps.llm.embed(
        [input],
        usage.meter("recall_embedding"),
        AbortSignal.timeout(deps.config.providerDeadlines.queryEmbeddingMs),
      )
    )[0];
  try {
    const vector = await embedOne(text).catch((err) => {
      // Longer than the embedding model's window (2,000 characters of CJK for a 512-token model):
      // its head, rather than a recall ranked by keyword alone.
      const head = headOf(text, EMBED_HEAD_CHARS);
      if (!isInputRefusal(err) || head === text) throw err;
      return embedOne(head);
    });
    if (key) deps.queryEmbeddings.set(key, vector);
    return vector;
  } catch (err) {
    rethrowRefusal(err);
    deps.log.warn("recall: query embedding failed; ranking by keyword and recency", errorFields(err));
    return undefined;
  } finally {
    timings.push({ name: "embedding", ms: performance.now() - started });
  }
}

/**
 * One statement for facts, messages and episodes. If it fails, each part is read on its own, so
 * one failing part costs only itself (messages, which ride with the facts' part, are given up
 * first: the facts are the spec's answer, messages `[]`); if every part fails the error
 * propagates (a 500).
 */
async function retrieveDegrading(deps: Deps, r: Parameters<typeof retrieve>[1]): Promise<Retrieved> {
  try {
    return await retrieve(deps, r);
  } catch (err) {
    rethrowRefusal(err);
    deps.log.error("recall: retrieval failed; reading facts and episodes apart", errorFields(err));
  }
  const factsPart = async () => {
    try {
      return await retrieve(deps, { ...r, episodes: false });
    } catch (err) {
      if (!r.messages) throw err;
      rethrowRefusal(err);
      deps.log.error("recall: fact and message retrieval failed; reading facts alone", errorFields(err));
      return { ...(await retrieve(deps, { ...r, episodes: false, messages: false })), messages: [] };
    }
  };
  // The usage CTE (rolled back with the failed statement) rides with the facts' part.
  const [facts, episodes] = await Promise.allSettled([
    factsPart(),
    r.episodes ? retrieve(deps, { ...r, facts: false, messages: false, usage: null }) : Promise.resolve(undefined),
  ]);
  if (facts.status === "rejected" && (!r.episodes || episodes.status === "rejected")) throw facts.reason;
  if (facts.status === "rejected") deps.log.error("recall: fact retrieval failed", errorFields(facts.reason));
  if (episodes.status === "rejected") deps.log.error("recall: episode retrieval failed", errorFields(episodes.reason));
  const read = [facts, episodes].find((p) => p.status === "fulfilled" && p.value !== undefined);
  return {
    facts: facts.status === "fulfilled" ? facts.value.facts : [],
    episodes: episodes.status === "fulfilled" && episodes.value ? episodes.value.episodes : null,
    messages: facts.status === "fulfilled" ? facts.value.messages : r.messages ? [] : null,
    quoteSources: facts.status === "fulfilled" ? facts.value.quoteSources : new Map(),
    settings: read?.status === "fulfilled" ? (read.value?.settings ?? null) : null,
    budgetSpent: read?.status === "fulfilled" ? (read.value?.budgetSpent ?? false) : false,
  };
}

async function synthesisOf(
  deps: Deps,
  context: string,
  query: string | undefined,
  timings: Timing[],
  usage: UsageCollector,
) {
  const started = performance.now();
  try {
    const completion = await deps.llm.complete({
      system: RECALL_SYNTHESIS_PROMPT,
      messages: [{ role: "user", content: query ? `${context}\n\nQuestion: ${query}` : context }],
      meter: usage.meter("recall_synthesis"),
      signal: AbortSignal.timeout(deps.config.providerDeadlines.synthesisMs),
    });
    return completion.text.trim();
  } catch (err) {
    rethrowRefusal(err);
    deps.log.warn("recall: synthesis failed; answering without it", errorFields(err));
    return null;
  } finally {
    timings.push({ name: "synthesis", ms: performance.now() - started });
  }
}

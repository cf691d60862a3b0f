import type { Deps } from "../deps";
import { RECALL_SYNTHESIS_PROMPT } from "../llm/prompts";
import { errorFields } from "../log";
import { groupFacts, renderContext } from "./context";
import { type RankingMode, type Retrieved, retrieve, type SignalRanks } from "./retrieve";

export type RecallInclude = "episodes" | "synthesis" | "raw";

export interface RecallRequest {
  dataset: string;
  query?: string;
  include: RecallInclude[];
  limit?: number;
  minConfidence?: number;
  asOf?: Date;
}

/** A duration for the `Server-Timing` header. */
export interface Timing {
  name: "embedding" | "sql" | "synthesis";
  ms: number;
  description?: string;
}

export interface RecallOptions {
  /**
   * The dashboard's playground: also report the ranking mode, each returned fact's signal ranks
   * and whether the project exists, from the same statement (see `Retrieval.explain`).
   */
  explain?: boolean;
}

export interface RecallExplanation {
  mode: RankingMode;
  /** One entry per fact of `body.facts` (raw), same order; null when facts are not included. */
  ranks: (SignalRanks & { fused: number })[] | null;
  projectFound: boolean;
}

/**
 * The read path chat apps call before every model turn: at most one embedding call (none when
 * the query's vector is cached, none without a query), one SQL statement for facts and episodes
 * together, and a model call only for `synthesis`. Each part degrades on its own (spec rule 6):
 * no embedding, keyword plus recency; no facts, an empty block; no episodes, null; no synthesis,
 * null. Only when no data could be read at all does the request fail.
 */
export async function recall(deps: Deps, projectId: string, request: RecallRequest, options: RecallOptions = {}) {
  const timings: Timing[] = [];
  const include = new Set(request.include);
  const query = request.query?.trim() ? request.query : undefined;

  // With asOf the facts are ranked without vectors (rule 3); episodes still use one.
  const wantVector = query !== undefined && (request.asOf === undefined || include.has("episodes"));
  const vector = wantVector ? await embedQuery(deps, query, timings) : undefined;
  const mode: RankingMode = !query ? "recent" : vector && !request.asOf ? "hybrid" : "keyword";

  const started = performance.now();
  const retrieved = await retrieveDegrading(deps, {
    projectId,
    dataset: request.dataset,
    mode,
    query,
    vector,
    asOf: request.asOf,
    limit: request.limit,
    minConfidence: request.minConfidence,
    facts: true,
    episodes: include.has("episodes"),
    ...(options.explain ? { explain: true } : {}),
  });
  timings.push({ name: "sql", ms: performance.now() - started });

  const facts = retrieved.facts ?? [];
  const groups = groupFacts(facts);
  const context = renderContext(groups, retrieved.entities ?? []);
  const synthesis = include.has("synthesis") && context ? await synthesise(deps, context, query, timings) : null;

  const raw = include.has("raw");
  const ranked = raw ? [...facts].sort((a, b) => a.rank - b.rank) : null;
  return {
    body: {
      context,
      factCount: facts.length,
      synthesis,
      facts: ranked ? ranked.map(({ groupName: _g, rank: _r, ...fact }) => fact) : null,
      groups: raw ? groups : null,
      episodes: include.has("episodes") ? retrieved.episodes : null,
    },
    timings,
    ...(options.explain ? { explanation: explain(mode, ranked, retrieved) } : {}),
  };
}

function explain(mode: RankingMode, ranked: Retrieved["facts"], retrieved: Retrieved): RecallExplanation {
  const bySignal = new Map((retrieved.ranks ?? []).map((r) => [r.factId, r]));
  const none = { vector: null, keyword: null, anchor: null, recency: null };
  return {
    mode,
    ranks:
      ranked?.map((f) => ({ ...none, ...bySignal.get(f.factId), factId: f.factId, fused: f.relevanceScore })) ?? null,
    projectFound: retrieved.projectFound ?? false,
  };
}

async function embedQuery(deps: Deps, text: string, timings: Timing[]): Promise<number[] | undefined> {
  const key = { model: deps.config.openai.embeddingModel, dimensions: deps.config.openai.embeddingDimensions, text };
  const cached = deps.queryEmbeddings.get(key);
  if (cached) {
    timings.push({ name: "embedding", ms: 0, description: "cached" });
    return cached;
  }
  const started = performance.now();
  try {
    const [vector] = await deps.llm.embed([text]);
    deps.queryEmbeddings.set(key, vector);
    return vector;
  } catch (err) {
    deps.log.warn("recall: query embedding failed; ranking by keyword and recency", errorFields(err));
    return undefined;
  } finally {
    timings.push({ name: "embedding", ms: performance.now() - started });
  }
}

/**
 * One statement for facts and episodes. If it fails, each part is read on its own, so one
 * failing part costs only itself; if every part fails the error propagates (a 500).
 */
async function retrieveDegrading(deps: Deps, r: Parameters<typeof retrieve>[1]): Promise<Retrieved> {
  try {
    return await retrieve(deps, r);
  } catch (err) {
    deps.log.error("recall: retrieval failed; reading facts and episodes apart", errorFields(err));
  }
  const [facts, episodes] = await Promise.allSettled([
    retrieve(deps, { ...r, episodes: false }),
    r.episodes ? retrieve(deps, { ...r, facts: false }) : Promise.resolve(undefined),
  ]);
  if (facts.status === "rejected" && (!r.episodes || episodes.status === "rejected")) throw facts.reason;
  if (facts.status === "rejected") deps.log.error("recall: fact retrieval failed", errorFields(facts.reason));
  if (episodes.status === "rejected") deps.log.error("recall: episode retrieval failed", errorFields(episodes.reason));
  const found = [facts, episodes].find((p) => p.status === "fulfilled" && p.value?.projectFound !== undefined);
  return {
    facts: facts.status === "fulfilled" ? facts.value.facts : [],
    entities: facts.status === "fulfilled" ? facts.value.entities : [],
    episodes: episodes.status === "fulfilled" && episodes.value ? episodes.value.episodes : null,
    ...(r.explain
      ? {
          ranks: facts.status === "fulfilled" ? facts.value.ranks : null,
          projectFound: found?.status === "fulfilled" ? found.value?.projectFound : undefined,
        }
      : {}),
  };
}

async function synthesise(deps: Deps, context: string, query: string | undefined, timings: Timing[]) {
  const started = performance.now();
  try {
    const completion = await deps.llm.complete({
      system: RECALL_SYNTHESIS_PROMPT,
      messages: [{ role: "user", content: query ? `${context}\n\nQuestion: ${query}` : context }],
    });
    return completion.text.trim();
  } catch (err) {
    deps.log.warn("recall: synthesis failed; answering without it", errorFields(err));
    return null;
  } finally {
    timings.push({ name: "synthesis", ms: performance.now() - started });
  }
}

import { sql } from "drizzle-orm";
import { expect } from "vitest";
import { rowsOf, toIso } from "../../lib/db/rows";
import { runDueJobs } from "../../lib/jobs/runner";
import type { DEFAULT_SETTINGS } from "../../lib/settings/settings";
import { patchProjectSettings } from "../../lib/settings/store";
import { TEST_EMBEDDING_DIMENSIONS } from "./constants";
import { type Tenant, useEpisodicService } from "./episodic-fixtures";
import { type ChatRequest, fakeEmbedding } from "./fake-openai";
import type { TestServiceOptions } from "./service";

/**
 * Shared set-up for the fact-extraction tests: the episodic service (real job path, manual clock,
 * fake provider) plus scripted extraction answers, the database's own similarity of two texts
 * (so thresholds can be put exactly at, under or over a pair), and the semantic tables as rows.
 */
export interface ModelFact {
  subject: string;
  predicate: string;
  object: string;
  objectIsEntity: boolean;
  confidence: number;
  sourceQuote: string;
  validAt: string | null;
}
export interface ModelEntity {
  name: string;
  type: string;
}
export interface Extraction {
  facts: ModelFact[];
  entities: ModelEntity[];
}

/** A fact as the model would return it: about the user, confident, quoting `quote`. */
export function fact(predicate: string, object: string, sourceQuote: string, more: Partial<ModelFact> = {}): ModelFact {
  return {
    subject: "user",
    predicate,
    object,
    objectIsEntity: false,
    confidence: 0.9,
    sourceQuote,
    validAt: null,
    ...more,
  };
}

/** The text embedded for a fact (and stored with it). */
export const factText = (predicate: string, object: string) => `user ${predicate} ${object}`;

/** Pairs the judge received: `Pair n:\nOLD: ...\nNEW: ...`. */
export function judgedPairs(request: ChatRequest) {
  const text = request.messages.find((m) => m.role === "user")?.content ?? "";
  return [...text.matchAll(/Pair (\d+):\nOLD: (.*)\nNEW: (.*)/g)].map((m) => ({
    pair: Number(m[1]),
    old: m[2],
    new: m[3],
  }));
}

/** A judge answering every pair it is given with `contradicts(old, new)`. */
export const judge = (contradicts: (old: string, young: string) => boolean) => (request: ChatRequest) => ({
  judgements: judgedPairs(request).map((p) => ({ pair: p.pair, contradicts: contradicts(p.old, p.new) })),
});

export interface FactRow {
  id: string;
  dataset: string;
  episodeId: string | null;
  subject: string;
  predicate: string;
  object: string;
  objectIsEntity: boolean;
  confidence: number;
  sourceQuote: string;
  validAt: string;
  validUntil: string | null;
  invalidAt: string | null;
  createdAt: string;
}

export function useSemanticService(options: Omit<TestServiceOptions, "provider" | "manualTime"> = {}) {
  const episodic = useEpisodicService(options);
  const { h } = episodic;
  const db = () => h.svc.deps.db;

  /**
   * A thread of `lines` (user, assistant, user, ... one second apart), ended and run through the
   * real job path (summary, then extraction) with `answer` scripted for fact_extraction.
   */
  async function extract(
    t: Tenant,
    lines: string[],
    answer: Extraction | ((request: ChatRequest) => unknown),
    opts: { dataset?: string; episodic?: Record<string, unknown> } = {},
  ) {
    const threadId = await t.thread(opts.dataset ?? "ds", opts.episodic);
    const said = await t.conversation(threadId, lines);
    h.fake.onStructured("fact_extraction", typeof answer === "function" ? answer : () => answer);
    const { episodeId } = await t.end(threadId);
    expect(episodeId).toEqual(expect.any(String));
    await runDueJobs(h.svc.deps);
    return { threadId, episodeId: episodeId as string, said };
  }

  /** Cosine similarity as the database computes it (half-precision vectors, pgvector's `<=>`). */
  async function similarity(a: string, b: string) {
    const vec = (text: string) => `[${fakeEmbedding(text, TEST_EMBEDDING_DIMENSIONS).join(",")}]`;
    const [row] = rowsOf<{ sim: number | string }>(
      await db().execute(sql`SELECT 1 - (${vec(a)}::halfvec <=> ${vec(b)}::halfvec) AS sim`),
    );
    return Number(row.sim);
  }

  const setSemantic = (t: Tenant, semantic: Partial<(typeof DEFAULT_SETTINGS)["semantic"]>) =>
    patchProjectSettings({ deps: h.svc.deps, projectId: t.projectId }, { semantic });

  async function facts(t: Tenant): Promise<FactRow[]> {
    const rows = rowsOf<{
      id: string;
      dataset: string;
      episode_id: string | null;
      subject: string;
      predicate: string;
      object: string;
      object_is_entity: boolean;
      confidence: number | string;
      source_quote: string;
      valid_at: unknown;
      valid_until: unknown;
      invalid_at: unknown;
      created_at: unknown;
    }>(
      await db().execute(sql`
        SELECT id, dataset, episode_id, subject, predicate, object, object_is_entity, confidence, source_quote,
          valid_at, valid_until, invalid_at, created_at
        FROM facts WHERE project_id = ${t.projectId} ORDER BY created_at, predicate, object`),
    );
    return rows.map((r) => ({
      id: r.id,
      dataset: r.dataset,
      episodeId: r.episode_id,
      subject: r.subject,
      predicate: r.predicate,
      object: r.object,
      objectIsEntity: r.object_is_entity,
      confidence: Number(r.confidence),
      sourceQuote: r.source_quote,
      validAt: toIso(r.valid_at) as string,
      validUntil: toIso(r.valid_until),
      invalidAt: toIso(r.invalid_at),
      createdAt: toIso(r.created_at) as string,
    }));
  }

  /** One fact by predicate and object (exactly one must exist). */
  async function factBy(t: Tenant, predicate: string, object: string) {
    const found = (await facts(t)).filter((f) => f.predicate === predicate && f.object === object);
    expect(found, `${predicate} ${object}`).toHaveLength(1);
    return found[0];
  }

  async function entities(t: Tenant) {
    return rowsOf<{ id: string; dataset: string; name: string; type: string; dims: number | null }>(
      await db().execute(sql`
        SELECT id, dataset, name, type, vector_dims(embedding) AS dims FROM entities
        WHERE project_id = ${t.projectId} ORDER BY created_at, lower(name), type`),
    ).map((r) => ({ ...r, dims: r.dims === null ? null : Number(r.dims) }));
  }

  /** fact_entities as "predicate object -> entity name (TYPE)". */
  async function links(t: Tenant) {
    return rowsOf<{ link: string; entity_id: string; fact_id: string }>(
      await db().execute(sql`
        SELECT f.predicate || ' ' || f.object || ' -> ' || e.name || ' (' || e.type || ')' AS link, fe.entity_id, fe.fact_id
        FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id JOIN entities e ON e.id = fe.entity_id
        WHERE f.project_id = ${t.projectId} ORDER BY 1`),
    );
  }

  /** The internal extraction state of an episode (not exposed by the API). */
  async function semanticState(episodeId: string) {
    const [row] = rowsOf<{
      status: string;
      semantic_status: string;
      semantic_error: string | null;
      semantic_retry_count: number;
    }>(
      await db().execute(sql`
        SELECT status, semantic_status, semantic_error, semantic_retry_count FROM episodes WHERE id = ${episodeId}`),
    );
    return {
      status: row.status,
      semanticStatus: row.semantic_status,
      semanticError: row.semantic_error,
      semanticRetryCount: Number(row.semantic_retry_count),
    };
  }

  const calls = () => ({
    summary: h.fake.chatCalls("episode_summary").length,
    extraction: h.fake.chatCalls("fact_extraction").length,
    judge: h.fake.chatCalls("contradiction_judgement").length,
    chat: h.fake.chatCalls().length,
    embeddings: h.fake.embeddingCalls().length,
  });

  return {
    ...episodic,
    extract,
    similarity,
    setSemantic,
    facts,
    factBy,
    entities,
    links,
    semanticState,
    calls,
  };
}

import { createHash } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { jsonOf, rowsOf, toDate } from "../db/rows";
import { entities, episodes, factEntities, facts, messages, projects, threads } from "../db/schema";
import type { Deps } from "../deps";
import { renderTranscript, type TranscriptMessage } from "../episodic/transcript";
import { failureText } from "../errors";
import { LEASE_MS } from "../jobs/store";
import {
  CONTRADICTION_JUDGE_PROMPT,
  ContradictionJudgeSchema,
  FACT_EXTRACTION_PROMPT,
  FactExtractionSchema,
} from "../llm/prompts";
import { errorFields } from "../log";
import { flushTiny } from "../numbers";
import { resolveProjectSettings, resolveThreadSettings, type Settings, type ThreadSettings } from "../settings";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";

/** Semantic extraction is retried by the sweep at most this many times (a fixed cap, per spec). */
export const SEMANTIC_MAX_RETRIES = 3;
/** Live facts compared with each new fact (the nearest ones above the contradiction band). */
const CANDIDATES_PER_FACT = 5;

export type SemanticOutcome = "completed" | "failed" | "skipped";

interface Claimed {
  id: string;
  project_id: string;
  dataset: string;
  project_settings: Record<string, unknown> | string | null;
  thread_settings: ThreadSettings | string | null;
  transcript: (TranscriptMessage & { created_at: string })[] | string | null;
  /**
   * The claim's own stamp (the episode's updated_at written by the claim): every later write
   * requires it, so an attempt whose claim was taken over (its lease ran out) writes nothing.
   */
  claimedAt: string;
}

export interface NewFact {
  id: string;
  subject: string;
  predicate: string;
  object: string;
  objectIsEntity: boolean;
  confidence: number;
  sourceQuote: string;
  validAt: Date;
  embedding: number[];
}

const normalise = (s: string) =>
  s
    .toLowerCase()
    .replace(/[\u2018\u2019\u201c\u201d"'`]/g, "")
    .replace(/\s+/g, " ")
    .trim();

const stableId = (prefix: "fct" | "ent", ...parts: string[]) =>
  `${prefix}_${createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 20)}`;

/**
 * Facts and entities from a completed episode. At most two model calls (extraction, then one
 * judge call for every contradiction candidate at once) and one embedding batch, whatever the
 * number of facts; one statement finds the candidates of all new facts and entities; the writes
 * are one atomic batch with ids derived from the episode, so a retry never doubles a fact. Every
 * write after the claim requires the claim's own stamp: an attempt that outlived its lease and
 * was taken over writes nothing (its batch aborts) and does not overwrite the new owner's status.
 */
export async function processSemantic(deps: Deps, episodeId: string): Promise<SemanticOutcome> {
  const now = deps.clock.now();
  const claimedAt = now.toISOString();
  const [claimed] = rowsOf<Omit<Claimed, "claimedAt">>(
    await deps.db.execute(sql`
      WITH e AS (
        UPDATE ${episodes} SET semantic_status = 'processing', semantic_error = NULL, updated_at = ${claimedAt}::timestamptz,
          locked_until = ${new Date(now.getTime() + LEASE_MS).toISOString()}::timestamptz
        WHERE id = ${episodeId} AND status = 'completed'
          AND (semantic_status = 'pending'
               -- abandoned by a worker that died mid-way (its lease ran out, or a restart released it)
               OR (semantic_status = 'processing' AND (locked_until IS NULL OR locked_until < ${claimedAt}::timestamptz)))
        RETURNING id, project_id, thread_id, dataset, from_seq, to_seq
      )
      SELECT e.id, e.project_id, e.dataset, p.settings AS project_settings,
        (SELECT th.settings FROM ${threads} th WHERE th.id = e.thread_id) AS thread_settings,
        (SELECT json_agg(json_build_object('seq', m.seq, 'role', m.role, 'content', m.content, 'created_at', m.created_at) ORDER BY m.seq)
           FROM ${messages} m
          WHERE m.thread_id = e.thread_id AND m.seq BETWEEN e.from_seq AND e.to_seq AND NOT m.is_summary) AS transcript
      FROM e JOIN ${projects} p ON p.id = e.project_id`),
  );
  if (!claimed) return "skipped";
  const episode: Claimed = { ...claimed, claimedAt };
  // The same settings the episode was summarised with (the thread's episodic override included).
  const settings = resolveThreadSettings(
    resolveProjectSettings(claimed.project_settings ? jsonOf(claimed.project_settings) : null),
    claimed.thread_settings ? jsonOf(claimed.thread_settings) : undefined,
  );
  try {
    // Disabled since the episode was summarised (a re-queued retry, say): `enabled` false stops new work.
    if (!settings.semantic.enabled) {
      await setStatus(deps, episode, "skipped");
      return "skipped";
    }
    const transcript = claimed.transcript ? jsonOf(claimed.transcript) : [];
    await extractAndWrite(deps, episode, transcript, settings, now);
    return "completed";
  } catch (err) {
    const message = failureText(err);
    // Only while the claim is still ours: a lost claim must not mark the new owner's run failed.
    await deps.db.execute(sql`
      UPDATE ${episodes} SET semantic_status = 'failed', semantic_error = ${message}, updated_at = ${deps.clock.now().toISOString()}::timestamptz
      WHERE id = ${episodeId} AND semantic_status = 'processing' AND updated_at = ${claimedAt}::timestamptz`);
    deps.log.warn("fact extraction failed", { episodeId, projectId: claimed.project_id, ...errorFields(err) });
    return "failed";
  }
}

async function extractAndWrite(
  deps: Deps,
  episode: Claimed,
  transcript: (TranscriptMessage & { created_at: string })[],
  settings: Settings,
  now: Date,
) {
  const s = settings.semantic;
  const userLines = transcript.filter((m) => m.role === "user").map((m) => ({ ...m, norm: normalise(m.content) }));
  // Nothing the user said is left (the thread was deleted since the summary): no quote could be
  // checked, so no fact could be kept; no model call.
  if (userLines.length === 0) {
    await setStatus(deps, episode, "completed");
    return;
  }
  const extracted = await deps.llm.structured({
    name: "fact_extraction",
    schema: FactExtractionSchema,
    system: FACT_EXTRACTION_PROMPT,
    user: renderTranscript(transcript, settings.episodic.maxMessages),
  });

  // Keep claims about the user whose quote really is the user's words; no invented quotes.
  const seen = new Set<string>();
  const kept = extracted.facts.flatMap((f, ordinal) => {
    const quote = normalise(f.sourceQuote);
    const said = quote.length > 0 ? userLines.find((m) => m.norm.includes(quote)) : undefined;
    const key = `${normalise(f.predicate)}\u0000${normalise(f.object)}`;
    if (normalise(f.subject) !== "user" || !said || !f.predicate.trim() || !f.object.trim() || seen.has(key)) return [];
    seen.add(key);
    const stated = f.validAt ? new Date(f.validAt) : null;
    return [
      {
        ordinal,
        subject: "user",
        predicate: f.predicate.trim(),
        object: f.object.trim(),
        objectIsEntity: f.objectIsEntity,
        // Into 0-1, and below float4's normal range to 0: the column is a `real` (lib/numbers.ts).
        confidence: flushTiny(Math.min(1, Math.max(0, f.confidence))),
        sourceQuote: f.sourceQuote.trim(),
        validAt: stated && !Number.isNaN(stated.getTime()) ? stated : (toDate(said.created_at) as Date),
      },
    ];
  });
  const entitySeen = new Set<string>();
  const newEntities = extracted.entities
    .map((e) => ({ name: e.name.trim(), type: e.type }))
    .filter((e) => {
      const key = `${e.type}\u0000${normalise(e.name)}`;
      if (!normalise(e.name) || entitySeen.has(key)) return false;
      entitySeen.add(key);
      return true;
    });

  if (kept.length === 0 && newEntities.length === 0) {
    await setStatus(deps, episode, "completed");
    return;
  }

  const vectors = await deps.llm.embed([
    ...kept.map((f) => `${f.subject} ${f.predicate} ${f.object}`),
    ...newEntities.map((e) => e.name),
  ]);
  const factVectors = vectors.slice(0, kept.length);
  const entityVectors = vectors.slice(kept.length);

  const candidates = await findCandidates(deps, episode, factVectors, newEntities, entityVectors, s);

  // Dedup against live facts and within the batch (an earlier kept fact wins); collect
  // contradiction candidates. Every similarity comes from the database, so a pair inside one
  // extraction and the same pair across two extractions meet the thresholds alike.
  const accepted: (NewFact & { ordinal: number })[] = [];
  const acceptedIndex = new Set<number>();
  const pairs: { pair: number; oldId: string; old: string; newIndex: number }[] = [];
  kept.forEach((f, i) => {
    const mine = candidates.facts.filter((c) => c.i === i + 1);
    const duplicate =
      mine.some((c) => c.sim >= s.factDedupThreshold) ||
      candidates.twins.some((t) => t.j === i + 1 && acceptedIndex.has(t.i - 1));
    if (duplicate) return;
    acceptedIndex.add(i);
    accepted.push({ ...f, id: stableId("fct", episode.id, String(f.ordinal)), embedding: factVectors[i] });
    // A low-confidence fact can never invalidate, so it is not even judged.
    if (f.confidence < s.retrievalMinConfidence) return;
    for (const c of mine.filter((c) => c.sim < s.factDedupThreshold)) {
      pairs.push({
        pair: pairs.length + 1,
        oldId: c.id,
        old: `${c.subject} ${c.predicate} ${c.object}`,
        newIndex: accepted.length - 1,
      });
    }
  });

  const invalidated = new Map<string, Date>();
  if (pairs.length > 0) {
    const judged = await deps.llm.structured({
      name: "contradiction_judgement",
      schema: ContradictionJudgeSchema,
      system: CONTRADICTION_JUDGE_PROMPT,
      user: pairs
        .map((p) => {
          const n = accepted[p.newIndex];
          return `Pair ${p.pair}:\nOLD: ${p.old}\nNEW: ${n.subject} ${n.predicate} ${n.object}`;
        })
        .join("\n\n"),
    });
    for (const j of judged.judgements) {
      const p = pairs.find((x) => x.pair === j.pair);
      if (!j.contradicts || !p) continue;
      const until = accepted[p.newIndex].validAt;
      const current = invalidated.get(p.oldId);
      if (!current || until < current) invalidated.set(p.oldId, until);
    }
  }

  // Entity resolution: an existing entity of the same type absorbs the new one when it has the
  // same name (case-insensitive) or is close enough.
  const entityIdByName = new Map<string, string>();
  const entityRows: (typeof entities.$inferInsert)[] = [];
  newEntities.forEach((e, i) => {
    const match = candidates.entities.find((c) => c.i === i + 1);
    if (match && (match.sameName || match.sim > s.entityResolutionThreshold)) {
      entityIdByName.set(normalise(e.name), match.id);
      return;
    }
    const id = stableId("ent", episode.project_id, episode.dataset, e.type, normalise(e.name));
    entityIdByName.set(normalise(e.name), id);
    entityRows.push({
      id,
      projectId: episode.project_id,
      dataset: episode.dataset,
      name: e.name,
      type: e.type,
      embedding: entityVectors[i],
      createdAt: now,
    });
  });
  const links = accepted.flatMap((f) =>
    [f.object, f.subject]
      .map((name) => entityIdByName.get(normalise(name)))
      .filter((id): id is string => Boolean(id))
      .map((entityId) => ({ factId: f.id, entityId })),
  );

  const dims = sql.raw(String(deps.config.openai.embeddingDimensions));
  const batched = await deps.database.batch((db) => [
    db.execute(narrowSearch),
    // First, so it holds the episode's row lock for the rest of the batch, and aborts the whole
    // batch when this attempt's claim was taken over meanwhile (the new owner writes instead).
    // It also takes the dataset's write lock, so extractions of one dataset write one at a time.
    db.execute(completeIfStillClaimed(deps, episode)),
    ...(entityRows.length ? [db.insert(entities).values(entityRows).onConflictDoNothing()] : []),
    ...(accepted.length
      ? [
          // The duplicate check again, at write time: another extraction of the dataset may have
          // written the same fact since this one looked (it was waiting for a model call). Under
          // the dataset's lock, so two never both pass it. The same nearest-neighbour search as
          // findCandidates (the HNSW index's expression), similarity at full precision.
          db.execute(sql`
            insert into ${facts} (id, project_id, dataset, episode_id, subject, predicate, object, object_is_entity,
              confidence, source_quote, valid_at, embedding, created_at)
            SELECT n.id, ${episode.project_id}, ${episode.dataset}, ${episode.id}, n.subject, n.predicate, n.object,
              n.object_is_entity, n.confidence, n.source_quote, n.valid_at, n.embedding::vector, ${now.toISOString()}::timestamptz
            FROM jsonb_to_recordset(${JSON.stringify(
              accepted.map((f) => ({
                id: f.id,
                subject: f.subject,
                predicate: f.predicate,
                object: f.object,
                object_is_entity: f.objectIsEntity,
                confidence: f.confidence,
                source_quote: f.sourceQuote,
                valid_at: f.validAt.toISOString(),
                embedding: `[${f.embedding.join(",")}]`,
              })),
            )}::jsonb) AS n(id text, subject text, predicate text, object text, object_is_entity boolean,
              confidence real, source_quote text, valid_at timestamptz, embedding text)
            WHERE NOT EXISTS (
              SELECT 1 FROM (
                SELECT f.embedding FROM ${facts} f
                WHERE f.project_id = ${episode.project_id} AND f.dataset = ${episode.dataset} AND f.invalid_at IS NULL
                  AND vector_dims(f.embedding) = ${dims}
                ORDER BY f.embedding::halfvec(${dims}) <=> n.embedding::vector::halfvec(${dims})
                LIMIT ${CANDIDATES_PER_FACT}
              ) c WHERE 1 - (c.embedding <=> n.embedding::vector) >= ${settings.semantic.factDedupThreshold})
            ON CONFLICT DO NOTHING`),
        ]
      : []),
    ...(links.length
      ? [
          // Only for the facts that were written (a fact dropped above as a duplicate has none).
          db.execute(sql`
            insert into ${factEntities} (fact_id, entity_id)
            SELECT l.fact_id, l.entity_id
            FROM jsonb_to_recordset(${JSON.stringify(links.map((l) => ({ fact_id: l.factId, entity_id: l.entityId })))}::jsonb)
              AS l(fact_id text, entity_id text)
            WHERE EXISTS (SELECT 1 FROM ${facts} f WHERE f.id = l.fact_id)
            ON CONFLICT DO NOTHING`),
        ]
      : []),
    ...(invalidated.size
      ? [
          // validUntil never precedes the old fact's own validAt (a new fact stated as true from
          // an earlier date still ends the old one, at its start rather than before it).
          db.execute(sql`
            UPDATE ${facts} f SET invalid_at = ${now.toISOString()}::timestamptz,
              valid_until = GREATEST(f.valid_at, LEAST(coalesce(f.valid_until, v.until::timestamptz), v.until::timestamptz))
            FROM (VALUES ${sql.join(
              [...invalidated].map(([id, until]) => sql`(${id}, ${until.toISOString()})`),
              sql`, `,
            )}) AS v(id, until)
            WHERE f.id = v.id AND f.project_id = ${episode.project_id} AND f.invalid_at IS NULL`),
        ]
      : []),
  ]);
  ringWebhookJobs(deps, rowsOf<{ webhook_jobs: unknown }>(batched[1])[0]?.webhook_jobs);
  deps.log.info("facts extracted", {
    episodeId: episode.id,
    facts: accepted.length,
    dropped: kept.length - accepted.length,
    invalidated: invalidated.size,
    entities: entityRows.length,
  });
}

/** Final status without writes, only while the claim is still this attempt's. */
async function setStatus(deps: Deps, episode: Claimed, status: "completed" | "skipped") {
  await deps.db.execute(sql`
    UPDATE ${episodes} SET semantic_status = ${status}, updated_at = ${deps.clock.now().toISOString()}::timestamptz
    WHERE id = ${episode.id} AND semantic_status = 'processing' AND updated_at = ${episode.claimedAt}::timestamptz`);
}

/**
 * Marks the extraction completed when the claim is still this attempt's, and otherwise fails (a
 * cast error on a value only known at run time), which rolls back the batch it leads.
 */
function completeIfStillClaimed(deps: Deps, episode: Claimed) {
  const now = deps.clock.now().toISOString();
  return sql`
    WITH done AS (
      UPDATE ${episodes} SET semantic_status = 'completed', updated_at = ${now}::timestamptz
      WHERE id = ${episode.id} AND semantic_status = 'processing' AND updated_at = ${episode.claimedAt}::timestamptz
      RETURNING id, project_id, thread_id, dataset
    ),
    -- The dataset's write lock, held to the end of the batch's transaction.
    locked AS (SELECT pg_advisory_xact_lock(hashtextextended(${`facts:${episode.project_id}:${episode.dataset}`}, 0))),
    ${webhookEventCtes("facts.extracted", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset) AS data FROM done`, now)}
    SELECT CASE WHEN count(*) = 1 THEN 1
      ELSE ('fact extraction lost its claim on the episode (taken over after its lease ran out): ' || count(*))::int
    END AS owned, ${webhookJobsColumn} AS webhook_jobs FROM done, locked`;
}

/**
 * One statement for every candidate of the episode: for each new fact, the nearest live facts of
 * the dataset at or above the contradiction band; pairs of new facts at or above the dedup
 * threshold; for each new entity, the same-type entity named alike (case-insensitive: similarity
 * 1) or nearest. Exact distances over the dataset's rows (the ORDER BY is not the HNSW index's
 * halfvec expression), so a tenant filter never starves the candidate list.
 */
async function findCandidates(
  deps: Deps,
  episode: Claimed,
  factVectors: number[][],
  newEntities: { name: string; type: string }[],
  entityVectors: number[][],
  s: Settings["semantic"],
) {
  const vec = (v: number[]) => `[${v.join(",")}]`;
  const dims = deps.config.openai.embeddingDimensions;
  const factJson = JSON.stringify(factVectors.map(vec));
  const entityJson = JSON.stringify(newEntities.map((e, i) => ({ v: vec(entityVectors[i]), t: e.type, n: e.name })));
  const rows = rowsOf<{
    kind: "fact" | "twin" | "entity";
    i: number | string;
    j: number | string | null;
    id: string;
    subject: string | null;
    predicate: string | null;
    object: string | null;
    sim: number | string;
    same_name: boolean | null;
  }>(
    await candidatesWithNarrowSearch(
      deps,
      sql`
      WITH q AS (SELECT v::vector AS v, i FROM jsonb_array_elements_text(${factJson}::jsonb) WITH ORDINALITY AS q(v, i)),
      eq AS (SELECT (o ->> 'v')::vector AS v, o ->> 't' AS t, o ->> 'n' AS n, i
             FROM jsonb_array_elements(${entityJson}::jsonb) WITH ORDINALITY AS eq(o, i)),
      fc AS (
        SELECT q.i, c.id, c.subject, c.predicate, c.object, c.sim FROM q CROSS JOIN LATERAL (
          SELECT f.id, f.subject, f.predicate, f.object, 1 - (f.embedding <=> q.v) AS sim
          FROM ${facts} f
          WHERE f.project_id = ${episode.project_id} AND f.dataset = ${episode.dataset} AND f.invalid_at IS NULL
            AND vector_dims(f.embedding) = ${sql.raw(String(dims))}
          -- The HNSW index's own expression and predicate (lib/db/vector-indexes.ts), so the index
          -- serves the search (iterative scan fills the LIMIT despite the tenant filter); the
          -- similarity above is computed at full precision for the thresholds.
          ORDER BY f.embedding::halfvec(${sql.raw(String(dims))}) <=> q.v::halfvec(${sql.raw(String(dims))})
          LIMIT ${CANDIDATES_PER_FACT}
        ) c WHERE c.sim >= ${s.contradictionBandMin}
      ),
      tw AS (
        SELECT a.i, b.i AS j, 1 - (a.v <=> b.v) AS sim FROM q a JOIN q b ON a.i < b.i
        WHERE 1 - (a.v <=> b.v) >= ${s.factDedupThreshold}
      ),
      ec AS (
        SELECT eq.i, c.id, c.sim, c.same_name FROM eq CROSS JOIN LATERAL (
          SELECT e.id, lower(e.name) = lower(eq.n) AS same_name,
            CASE WHEN lower(e.name) = lower(eq.n) THEN 1.0 ELSE 1 - (e.embedding <=> eq.v) END AS sim
          FROM ${entities} e
          WHERE e.project_id = ${episode.project_id} AND e.dataset = ${episode.dataset} AND e.type = eq.t
            -- the same name always matches, embedded or not (it is the unique key a new row would hit)
            AND (lower(e.name) = lower(eq.n)
                 OR (e.embedding IS NOT NULL AND vector_dims(e.embedding) = vector_dims(eq.v)))
          ORDER BY lower(e.name) = lower(eq.n) DESC, sim DESC LIMIT 1
        ) c
      )
      SELECT 'fact' AS kind, i, NULL::bigint AS j, id, subject, predicate, object, sim, NULL::boolean AS same_name FROM fc
      UNION ALL
      SELECT 'twin', i, j, NULL, NULL, NULL, NULL, sim, NULL FROM tw
      UNION ALL
      SELECT 'entity', i, NULL, id, NULL, NULL, NULL, sim, same_name FROM ec`,
    ),
  );
  const typed = rows.map((r) => ({ ...r, i: Number(r.i), j: Number(r.j), sim: Number(r.sim) }));
  return {
    facts: typed.filter((r) => r.kind === "fact").sort((a, b) => b.sim - a.sim),
    twins: typed.filter((r) => r.kind === "twin"),
    entities: typed.filter((r) => r.kind === "entity").map((r) => ({ ...r, sameName: r.same_name === true })),
  };
}

/**
 * The HNSW candidate list for extraction's searches. They look only for near-duplicates and
 * contradiction candidates (similarity at least contradictionBandMin), which a short list finds;
 * the database default (200, set for recall's broader searches) made extraction five times slower.
 * `set_config(..., true)` lasts to the end of the transaction, so it runs with the statement it
 * serves in one batch (one round trip on Neon).
 */
const EXTRACTION_EF_SEARCH = 40;
const narrowSearch = sql`SELECT set_config('hnsw.ef_search', ${String(EXTRACTION_EF_SEARCH)}, true)`;

async function candidatesWithNarrowSearch(deps: Deps, statement: SQL): Promise<unknown> {
  const [, result] = await deps.database.batch((db) => [db.execute(narrowSearch), db.execute(statement)]);
  return result;
}

import { type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { ExtractionReportRow } from "../db/extraction-report";
import { dbInt, dbJson, dbNumber, parsedRowsOf, rowsOf } from "../db/rows";
import { entities, episodes, factEntities, facts, factTerms, messageSearch, messages } from "../db/schema";
import { datasetFilter, exactPathSql, nearestInDatasetSql, rowsWithinScanMax } from "../db/vectors";
import type { Deps } from "../deps";
import { failureText } from "../errors";
import {
  CONTRADICTION_JUDGE_PROMPT,
  ContradictionJudgeSchema,
  FACT_EXTRACTION_PROMPT,
  FactExtractionSchema,
} from "../llm/prompts";
import { embedAllOrHeads } from "../llm/refused-inputs";
import { renderTranscript, type TranscriptMessage, withTranscriptBudget } from "../llm/transcript";
import type { UsageEvent } from "../llm/usage";
import { errorFields } from "../log";
import type { Settings } from "../settings/settings";
import { type UsageCollector, usageCollector } from "../usage/collector";
import { flushUsage, usageInsertSql } from "../usage/sql";
import { ringWebhookJobs, webhookEventCtes, webhookJobsColumn } from "../webhooks/events";
import {
  decideFacts,
  type Ending,
  factLinks,
  invalidations,
  type JudgePair,
  judgeInput,
  type NewFact,
  quotingSeqs,
  resolveEntities,
  screenEntities,
  screenFacts,
} from "./candidates";
import { type ExtractionReport, reportFields, tallyReport } from "./report";
import { NAME_PREDICATE, userNames } from "./subject";

/** Semantic extraction is retried by the sweep at most this many times (a fixed cap, per spec). */
export const SEMANTIC_MAX_RETRIES = 3;
/** Live facts compared with each new fact (the nearest ones above the contradiction band). */
const CANDIDATES_PER_FACT = 5;

/** `lost`: the episode is no longer this run's (its job was claimed again): nothing written. */
export type SemanticOutcome = "completed" | "failed" | "skipped" | "lost";

type Transcript = (TranscriptMessage & { created_at: string })[];

/**
 * The names the user goes by in the dataset's live name facts, as SQL over the claimed episode
 * `e` (its project_id and dataset): a column of the stage's claim statement (lib/pipeline/claim.ts).
 */
export function storedUserNamesSql(e: SQL): SQL {
  return sql`(SELECT json_agg(DISTINCT f.object) FROM ${facts} f
    WHERE f.project_id = ${e}.project_id AND f.dataset = ${e}.dataset AND f.invalid_at IS NULL
      AND regexp_replace(lower(trim(f.predicate)), '[[:space:]-]+', '_', 'g') ~ ${NAME_PREDICATE})`;
}

/** An episode whose extraction stage a job run has claimed (lib/pipeline/claim.ts), and what it needs. */
export interface ExtractionInput {
  id: string;
  project_id: string;
  dataset: string;
  transcript: Transcript;
  /** The names the user goes by in the dataset's live facts (see lib/semantic/subject.ts). */
  user_names: string[];
  /** The settings the episode was summarised with (the thread's episodic override included). */
  settings: Settings;
  /**
   * The claim stamp of the job run (see `Job.claimedAt`), which the claim wrote on the episode:
   * every later write requires it, so a run whose job was claimed again writes nothing.
   */
  claimedAt: string;
}

/**
 * Facts and entities from a claimed episode (its extraction is `processing` under this run's
 * claim stamp). At most two model calls (extraction, then one judge call for every contradiction
 * candidate at once) and one embedding batch, whatever the number of facts; one statement finds
 * the candidates of all new facts and entities; the writes are one atomic batch with ids derived
 * from the episode, so a retry never doubles a fact. Every write requires the claim stamp: a run
 * that outlived its job's lease and whose job was claimed again writes nothing (its batch aborts)
 * and does not overwrite the new owner's status.
 */
export async function extractFacts(deps: Deps, episode: ExtractionInput): Promise<SemanticOutcome> {
  const now = deps.clock.now();
  const { settings } = episode;
  // Recorded with the facts' write batch; what it did not take (no write, a failure) after it.
  const usage = usageCollector();
  try {
    // Disabled since the episode was summarised (a re-queued retry, say): `enabled` false stops new work.
    if (!settings.semantic.enabled) return (await setStatus(deps, episode, "skipped")) ? "skipped" : "lost";
    return (await extractAndWrite(deps, episode, episode.transcript, settings, now, usage)) ? "completed" : "lost";
  } catch (err) {
    const message = failureText(err);
    // Only while the claim is still ours: a lost claim must not mark the new owner's run failed.
    const marked = rowsOf(
      await deps.db.execute(sql`
        UPDATE ${episodes} SET semantic_status = 'failed', semantic_error = ${message}, updated_at = ${deps.clock.now().toISOString()}::timestamptz
        WHERE ${stillClaimed(episode)} RETURNING id`),
    );
    if (marked.length === 0) return "lost";
    deps.log.warn("fact extraction failed", {
      episodeId: episode.id,
      projectId: episode.project_id,
      ...errorFields(err),
    });
    return "failed";
  } finally {
    await flushUsage(deps, usage, { projectId: episode.project_id, dataset: episode.dataset });
  }
}

/** The guard of every write: extraction still processing under this run's claim stamp. */
const stillClaimed = (episode: ExtractionInput) =>
  sql`id = ${episode.id} AND semantic_status = 'processing' AND claimed_at = ${episode.claimedAt}::timestamptz`;

/** What the extraction will write, decided: one atomic batch writes it all. */
interface Decided {
  accepted: NewFact[];
  ended: Map<string, Ending[]>;
  entityRows: (typeof entities.$inferInsert)[];
  links: { factId: string; entityId: string }[];
  report: ExtractionReport;
}

/**
 * The model's answer screened (lib/semantic/candidates.ts), embedded, compared with the dataset,
 * judged and written; every proposed fact ends kept or dropped for a counted reason, and the
 * episode records the tally.
 */
async function extractAndWrite(
  deps: Deps,
  episode: ExtractionInput,
  transcript: Transcript,
  settings: Settings,
  now: Date,
  usage: UsageCollector,
): Promise<boolean> {
  const s = settings.semantic;
  const userLines = transcript.filter((m) => m.role === "user");
  // Nothing the user said is left (the thread was deleted since the summary, or all of it was
  // forgotten: lib/pipeline/claim.ts): no quote could be checked, so no fact could be kept; no
  // model call.
  if (userLines.length === 0) return finishWithoutWrites(deps, episode, tallyReport(0, []));
  const extracted = await withTranscriptBudget((budget) =>
    deps.llm.structured({
      name: "fact_extraction",
      schema: FactExtractionSchema,
      system: FACT_EXTRACTION_PROMPT,
      user: renderTranscript(transcript, settings.episodic.maxMessages, budget),
      meter: usage.meter("fact_extraction"),
    }),
  );
  const names = userNames({
    userLines: userLines.map((m) => m.content),
    // The self-stated facts whose quote is the user's words (no names are needed to screen those).
    proposed: screenFacts(extracted.facts, userLines, []).kept,
    stored: episode.user_names,
  });
  const screened = screenFacts(extracted.facts, userLines, names);
  const newEntities = screenEntities(extracted.entities);
  if (screened.kept.length === 0 && newEntities.length === 0) {
    return finishWithoutWrites(deps, episode, tallyReport(extracted.facts.length, screened.drops));
  }

  const vectors = await embedExtracted(
    deps,
    [...screened.kept.map((f) => `${f.subject} ${f.predicate} ${f.object}`), ...newEntities.map((e) => e.name)],
    usage,
  );
  const factVectors = vectors.slice(0, screened.kept.length);
  const entityVectors = vectors.slice(screened.kept.length);
  const found = await findCandidates(deps, episode, factVectors, newEntities, entityVectors, s);
  const decided = decideFacts(screened.kept, factVectors, found, s, episode.id);
  const ended = await judgeContradictions(deps, decided.pairs, decided.accepted, usage);
  const resolved = resolveEntities(newEntities, entityVectors, found.entities, s.entityResolutionThreshold, {
    projectId: episode.project_id,
    dataset: episode.dataset,
    now,
  });
  await writeExtraction(deps, episode, s.factDedupThreshold, now, usage, {
    accepted: decided.accepted,
    ended,
    entityRows: resolved.rows,
    links: factLinks(decided.accepted, resolved.named),
    report: tallyReport(extracted.facts.length, [...screened.drops, ...decided.drops], ended.size),
  });
  return true;
}

/** One judge call for every contradiction pair at once (none without pairs). */
async function judgeContradictions(deps: Deps, pairs: JudgePair[], accepted: NewFact[], usage: UsageCollector) {
  if (pairs.length === 0) return new Map<string, Ending[]>();
  const judged = await deps.llm.structured({
    name: "contradiction_judgement",
    schema: ContradictionJudgeSchema,
    system: CONTRADICTION_JUDGE_PROMPT,
    user: judgeInput(pairs, accepted),
    meter: usage.meter("contradiction_judge"),
  });
  return invalidations(pairs, judged.judgements, accepted);
}

/**
 * The kept facts' and new entities' vectors in one call. A fact the embedding model refuses whole
 * (a long object, a model with a short window) is embedded by its head rather than failing the
 * episode's every fact on every retry.
 */
function embedExtracted(deps: Deps, texts: string[], usage: UsageCollector): Promise<number[][]> {
  const meter = usage.meter("extraction_embedding");
  return embedAllOrHeads((batch) => deps.llm.embed(batch, meter), texts);
}

/** One info line per extracted episode: what was proposed, kept and dropped, by reason. */
function logExtraction(deps: Deps, episode: ExtractionInput, report: ExtractionReport, entities: number) {
  deps.log.info("facts extracted", { episodeId: episode.id, ...reportFields(report), entities });
}

/** Completed with its report and nothing to write (every fact dropped, no entity), if still ours. */
async function finishWithoutWrites(deps: Deps, episode: ExtractionInput, report: ExtractionReport) {
  if (!(await setStatus(deps, episode, "completed", report))) return false;
  logExtraction(deps, episode, report, 0);
  return true;
}

/**
 * The write batch (one transaction). Every write after the claim guard requires the claim; the
 * facts statement records the report as written (see insertFacts).
 */
async function writeExtraction(
  deps: Deps,
  episode: ExtractionInput,
  dedupThreshold: number,
  now: Date,
  usage: UsageCollector,
  d: Decided,
) {
  const calls = usage.take();
  const batched = await writeBatch(deps, usage, calls, (db) => [
    db.execute(narrowSearch),
    // First, so it holds the episode's row lock for the rest of the batch, and aborts the whole
    // batch when this attempt's claim was taken over meanwhile (the new owner writes instead).
    // It also takes the dataset's write lock, so extractions of one dataset write one at a time.
    db.execute(completeIfStillClaimed(deps, episode, d.report, announced(d))),
    ...(d.entityRows.length ? [db.insert(entities).values(d.entityRows).onConflictDoNothing()] : []),
    ...(d.accepted.length ? [db.execute(insertFacts(deps, episode, d, dedupThreshold, now))] : []),
    ...(d.links.length ? [db.execute(insertLinks(d.links))] : []),
    ...(d.ended.size ? [db.execute(endFacts(episode, d.ended, now))] : []),
    // Last, so the result indexes above stay put; in the same transaction and round trip.
    ...(calls.length
      ? [
          db.execute(
            usageInsertSql(calls, { projectId: episode.project_id, dataset: episode.dataset }, now.toISOString()),
          ),
        ]
      : []),
  ]);
  ringWebhookJobs(deps, parsedRowsOf(z.object({ webhook_jobs: z.unknown() }), batched[1])[0]?.webhook_jobs);
  // The report as the last statement that corrected it wrote it: the ends', else the facts'.
  const factsAt = d.entityRows.length ? 3 : 2;
  const endsAt = factsAt + (d.accepted.length ? 1 : 0) + (d.links.length ? 1 : 0);
  const correctedAt = d.ended.size ? endsAt : d.accepted.length ? factsAt : undefined;
  const written =
    correctedAt === undefined
      ? undefined
      : parsedRowsOf(z.object({ extraction_report: dbJson(ExtractionReportRow) }), batched[correctedAt])[0];
  const report = written ? written.extraction_report : d.report;
  logExtraction(deps, episode, report, d.entityRows.length);
}

/** The batch; failed (a lost claim aborts it), its calls wait to be recorded after it. */
async function writeBatch(
  deps: Deps,
  usage: UsageCollector,
  calls: UsageEvent[],
  statements: Parameters<Deps["database"]["batch"]>[0],
) {
  try {
    return await deps.database.batch(statements);
  } catch (err) {
    usage.giveBack(calls);
    throw err;
  }
}

/**
 * The CANDIDATES_PER_FACT live facts of the episode's dataset nearest `query`, each with its
 * cosine `distance`, by the path the dataset's size calls for (nearestInDatasetSql, as recall's:
 * its facts as fact_terms counts them, every row). Left to the plan, a statement planned without
 * statistics, or with statistics taken while the dataset was small, guessed it a few facts and
 * read a large one's whole for each new fact: 8 new facts against 20,000 took 1.6 s.
 */
export function nearestLiveFacts(
  deps: Deps,
  episode: Pick<ExtractionInput, "project_id" | "dataset">,
  query: SQL,
  select: SQL,
): SQL {
  const { keyed, hidden } = datasetFilter("f", episode.project_id, episode.dataset);
  return nearestInDatasetSql({
    from: sql`${facts} f`,
    column: sql`f.embedding`,
    select,
    where: sql`${keyed} AND f.invalid_at IS NULL`,
    hiddenWhere: sql`${hidden} AND f.invalid_at IS NULL`,
    newest: sql`f.valid_at`,
    small: smallDataset(episode),
    query,
    dims: deps.config.openai.embeddingDimensions,
    limit: sql.raw(String(CANDIDATES_PER_FACT)),
  });
}

/**
 * The existing entity a new one (`eq`: its vector `v`, type `t`, name `n`) may be: the one of its
 * type named alike (case-insensitive; similarity 1), through the name index's whole key, else the
 * nearest of its type, by the path the dataset's size calls for (as nearestLiveFacts). Every
 * entity of the type scored against every new one took 1.3 s for 5 new entities beside 20,000.
 */
export function existingEntitySql(deps: Deps, episode: Pick<ExtractionInput, "project_id" | "dataset">): SQL {
  const { keyed, hidden } = datasetFilter("e", episode.project_id, episode.dataset);
  const ofType = sql`${keyed} AND e.type = eq.t`;
  const nearest = nearestInDatasetSql({
    from: sql`${entities} e`,
    column: sql`e.embedding`,
    select: sql`e.id`,
    where: ofType,
    hiddenWhere: sql`${hidden} AND e.type = eq.t`,
    // The name index's order within the dataset and type.
    newest: sql`lower(e.name)`,
    // Decided once per new entity (`sz`), not in each of the two paths.
    small: sql`sz.small`,
    query: sql`eq.v`,
    dims: deps.config.openai.embeddingDimensions,
    limit: sql`1`,
  });
  // The same name always matches, embedded or not (it is the unique key a new row would hit).
  return sql`SELECT id, same_name, sim FROM (
      SELECT e.id, true AS same_name, 1.0::float8 AS sim FROM ${entities} e
      WHERE ${ofType} AND lower(e.name) = lower(eq.n)
      UNION ALL
      SELECT near.id, false, 1 - near.distance
      -- Entities are not counted apart from the facts: the type's own rows say (rowsWithinScanMax).
      -- OFFSET 0: not pulled up, so its condition is not copied into both paths and run twice.
      FROM (SELECT ${smallDataset(episode)} AND ${rowsWithinScanMax(sql`${entities} e`, ofType)} AS small OFFSET 0) sz
      CROSS JOIN LATERAL (${nearest}) near) c
    ORDER BY same_name DESC, sim DESC LIMIT 1`;
}

/**
 * The episode's dataset holds at most VECTOR_SCAN_MAX facts (fact_terms counts every row, kept
 * by trigger) and is not a large share of the table (exactPathSql, as recall's): its vector
 * searches read its own rows (nearestInDatasetSql).
 */
function smallDataset(episode: Pick<ExtractionInput, "project_id" | "dataset">): SQL {
  return exactPathSql(
    sql`coalesce((SELECT t.docs FROM ${factTerms} t
      WHERE t.project_id = ${episode.project_id} AND t.dataset = ${episode.dataset} AND t.term = ''), 0)`,
    "facts",
  );
}

/**
 * The facts, and the episode's report as written. The duplicate check runs again here, at write
 * time: another extraction of the dataset may have written the same fact since this one looked
 * (it was waiting for a model call). Under the dataset's lock, so two never both pass it. The
 * same nearest-neighbour search as findCandidates (nearestLiveFacts). So does the claim's check
 * that the user's words were not forgotten (lib/pipeline/claim.ts): a fact forgotten while the
 * model was answering took its live twin out of that search and the quoting messages out of the
 * conversation index, so a fact is written only while one of the messages that hold its quote is
 * still indexed (each user message has an index row from its insert until a forget takes it).
 * A fact either check stops is counted a duplicate (of a fact written, or of one forgotten), so
 * the report stays whole.
 */
function insertFacts(deps: Deps, episode: ExtractionInput, d: Decided, dedupThreshold: number, now: Date) {
  const userLines = episode.transcript.filter((m) => m.role === "user");
  const rows = d.accepted.map((f) => ({
    source_seqs: quotingSeqs(f.sourceQuote, userLines),
    id: f.id,
    subject: f.subject,
    predicate: f.predicate,
    object: f.object,
    object_is_entity: f.objectIsEntity,
    confidence: f.confidence,
    source_quote: f.sourceQuote,
    valid_at: f.validAt.toISOString(),
    embedding: `[${f.embedding.join(",")}]`,
  }));
  return sql`
    WITH written AS (
      insert into ${facts} (id, project_id, dataset, episode_id, subject, predicate, object, object_is_entity,
        confidence, source_quote, valid_at, embedding, created_at)
      SELECT n.id, ${episode.project_id}, ${episode.dataset}, ${episode.id}, n.subject, n.predicate, n.object,
        n.object_is_entity, n.confidence, n.source_quote, n.valid_at, n.embedding::halfvec, ${now.toISOString()}::timestamptz
      FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS n(id text, subject text, predicate text, object text,
        object_is_entity boolean, confidence real, source_quote text, valid_at timestamptz, embedding text,
        source_seqs jsonb)
      WHERE NOT EXISTS (
        SELECT 1 FROM (${nearestLiveFacts(deps, episode, sql`n.embedding::halfvec`, sql`f.id`)}) c
        WHERE 1 - c.distance >= ${dedupThreshold})
        AND ${stillSaidSql(episode, sql`n.source_seqs`)}
      ON CONFLICT DO NOTHING
      RETURNING id
    )
    UPDATE ${episodes} SET extraction_report = ${JSON.stringify(d.report)}::jsonb
      || jsonb_build_object('kept', w.n, 'dropped', ${JSON.stringify(d.report.dropped)}::jsonb
        || jsonb_build_object('duplicate', ${d.report.dropped.duplicate + d.report.kept}::int - w.n))
    FROM (SELECT count(*)::int AS n FROM written) w
    WHERE ${episodes}.id = ${episode.id}
    RETURNING ${episodes}.extraction_report`;
}

/** Only for the facts that were written (a fact dropped as a duplicate at write time has none). */
function insertLinks(links: Decided["links"]) {
  return sql`
    insert into ${factEntities} (fact_id, entity_id)
    SELECT l.fact_id, l.entity_id
    FROM jsonb_to_recordset(${JSON.stringify(links.map((l) => ({ fact_id: l.factId, entity_id: l.entityId })))}::jsonb)
      AS l(fact_id text, entity_id text)
    WHERE EXISTS (SELECT 1 FROM ${facts} f WHERE f.id = l.fact_id)
    ON CONFLICT DO NOTHING`;
}

/**
 * Whether one of the episode's user messages at the sequence numbers `seqs` (a jsonb array: those
 * holding a new fact's quote, quotingSeqs) is still in the conversation index: forgetting a fact
 * takes the messages that said it out (each user message has an index row from its insert on).
 */
function stillSaidSql(episode: ExtractionInput, seqs: SQL): SQL {
  return sql`EXISTS (SELECT 1 FROM ${messages} m JOIN ${messageSearch} s ON s.message_id = m.id
    WHERE m.thread_id = (SELECT e.thread_id FROM ${episodes} e WHERE e.id = ${episode.id})
      AND m.seq IN (SELECT q.value::int FROM jsonb_array_elements_text(${seqs}) q))`;
}

/**
 * Ends the contradicted facts, each by the new facts that contradict it whose words were not
 * forgotten while the model answered (stillSaidSql: such a new fact is not written, insertFacts,
 * and ending the old one by it would leave the dataset holding neither), at the earliest of their
 * validAt. A new fact dropped at write time as a duplicate still ends it: its live twin says the
 * same. validUntil never precedes the old fact's own validAt (a new fact stated as true from an
 * earlier date still ends the old one, at its start rather than before it). The report's
 * `invalidated` becomes the count ended (not an old fact deleted meanwhile).
 */
function endFacts(episode: ExtractionInput, ended: Map<string, Ending[]>, now: Date) {
  const userLines = episode.transcript.filter((m) => m.role === "user");
  const rows = [...ended].flatMap(([oldId, by]) =>
    by.map(
      (e) => sql`(${oldId}, ${e.until.toISOString()}, ${JSON.stringify(quotingSeqs(e.sourceQuote, userLines))}::jsonb)`,
    ),
  );
  return sql`
    WITH v AS (
      SELECT e.old_id, min(e.until::timestamptz) AS until
      FROM (VALUES ${sql.join(rows, sql`, `)}) AS e(old_id, until, source_seqs)
      WHERE ${stillSaidSql(episode, sql`e.source_seqs`)}
      GROUP BY e.old_id),
    ended AS (
      UPDATE ${facts} f SET invalid_at = ${now.toISOString()}::timestamptz,
        valid_until = GREATEST(f.valid_at, LEAST(coalesce(f.valid_until, v.until), v.until))
      FROM v
      WHERE f.id = v.old_id AND f.project_id = ${episode.project_id} AND f.invalid_at IS NULL
      RETURNING f.id)
    UPDATE ${episodes} SET extraction_report = extraction_report
      || jsonb_build_object('invalidated', (SELECT count(*)::int FROM ended))
    WHERE id = ${episode.id}
    RETURNING extraction_report`;
}

/**
 * Final status without writes, only while the claim is still this attempt's (with the report
 * when extraction ran); whether it was.
 */
async function setStatus(
  deps: Deps,
  episode: ExtractionInput,
  status: "completed" | "skipped",
  report?: ExtractionReport,
) {
  const recorded = report ? sql`, extraction_report = ${JSON.stringify(report)}::jsonb` : sql``;
  const rows = rowsOf(
    await deps.db.execute(sql`
      UPDATE ${episodes} SET semantic_status = ${status}, updated_at = ${deps.clock.now().toISOString()}::timestamptz${recorded}
      WHERE ${stillClaimed(episode)}
      RETURNING id`),
  );
  return rows.length > 0;
}

/**
 * Whether the extraction's `facts.extracted` event fires: it writes a fact or an entity, or ends
 * a fact. Every proposed fact a duplicate of a stored one and every entity known already is no
 * news to a receiver.
 */
export function announced(d: Pick<Decided, "accepted" | "entityRows" | "ended">): boolean {
  return d.accepted.length > 0 || d.entityRows.length > 0 || d.ended.size > 0;
}

/**
 * Marks the extraction completed with its report (as planned; the facts statement corrects it
 * for a fact found a duplicate at write time) when the claim is still this attempt's, and
 * otherwise fails (a cast error on a value only known at run time), which rolls back the batch
 * it leads. `announce`: with the `facts.extracted` event.
 */
function completeIfStillClaimed(deps: Deps, episode: ExtractionInput, report: ExtractionReport, announce: boolean) {
  const now = deps.clock.now().toISOString();
  return sql`
    WITH done AS (
      UPDATE ${episodes} SET semantic_status = 'completed', updated_at = ${now}::timestamptz,
        extraction_report = ${JSON.stringify(report)}::jsonb
      WHERE ${stillClaimed(episode)}
      RETURNING id, project_id, thread_id, dataset
    ),
    -- The dataset's write lock, held to the end of the batch's transaction.
    locked AS (SELECT pg_advisory_xact_lock(hashtextextended(${`facts:${episode.project_id}:${episode.dataset}`}, 0))),
    ${webhookEventCtes("facts.extracted", sql`SELECT project_id, jsonb_build_object('episodeId', id, 'threadId', thread_id, 'dataset', dataset) AS data FROM done WHERE ${announce}::boolean`, now)}
    SELECT CASE WHEN count(*) = 1 THEN 1
      ELSE ('fact extraction lost its claim on the episode (taken over after its lease ran out): ' || count(*))::int
    END AS owned, ${webhookJobsColumn} AS webhook_jobs FROM done, locked`;
}

/**
 * One statement for every candidate of the episode: for each new fact, the nearest live facts of
 * the dataset at or above the contradiction band; pairs of new facts at or above the dedup
 * threshold; for each new entity, the same-type entity named alike (case-insensitive: similarity
 * 1) or nearest (existingEntitySql). The fact searches are nearestLiveFacts's (a small dataset's own rows, or an HNSW
 * index scan that pgvector's iterative scan keeps going until the tenant filter has let
 * CANDIDATES_PER_FACT rows through), each with its exact cosine over the stored vectors.
 */
async function findCandidates(
  deps: Deps,
  episode: ExtractionInput,
  factVectors: number[][],
  newEntities: { name: string; type: string }[],
  entityVectors: number[][],
  s: Settings["semantic"],
) {
  const vec = (v: number[]) => `[${v.join(",")}]`;
  const factJson = JSON.stringify(factVectors.map(vec));
  const entityJson = JSON.stringify(newEntities.map((e, i) => ({ v: vec(entityVectors[i]), t: e.type, n: e.name })));
  const typed = parsedRowsOf(
    CandidateRow,
    await candidatesWithNarrowSearch(deps, candidatesSql(deps, episode, factJson, entityJson, s)),
  );
  return {
    facts: typed.filter((r) => r.kind === "fact").sort((a, b) => b.sim - a.sim),
    twins: typed.filter((r) => r.kind === "twin"),
    entities: typed.filter((r) => r.kind === "entity").map((r) => ({ ...r, sameName: r.same_name })),
  };
}

/** A row of the candidates statement: a nearby live fact, a twin among the new facts, or an entity. */
const CandidateRow = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("fact"),
    i: dbInt,
    id: z.string(),
    subject: z.string().nullable(),
    predicate: z.string().nullable(),
    object: z.string().nullable(),
    sim: dbNumber,
  }),
  z.object({ kind: z.literal("twin"), i: dbInt, j: dbInt, sim: dbNumber }),
  z.object({ kind: z.literal("entity"), i: dbInt, id: z.string(), sim: dbNumber, same_name: z.boolean() }),
]);

/** The candidates statement (see findCandidates) over the new facts' and entities' vectors as JSON. */
function candidatesSql(
  deps: Deps,
  episode: ExtractionInput,
  factJson: string,
  entityJson: string,
  s: Settings["semantic"],
) {
  return sql`
      WITH q AS (SELECT v::halfvec AS v, i FROM jsonb_array_elements_text(${factJson}::jsonb) WITH ORDINALITY AS q(v, i)),
      eq AS (SELECT (o ->> 'v')::halfvec AS v, o ->> 't' AS t, o ->> 'n' AS n, i
             FROM jsonb_array_elements(${entityJson}::jsonb) WITH ORDINALITY AS eq(o, i)),
      fc AS (
        SELECT q.i, c.id, c.subject, c.predicate, c.object, 1 - c.distance AS sim FROM q CROSS JOIN LATERAL (${nearestLiveFacts(
          deps,
          episode,
          sql`q.v`,
          sql`f.id, f.subject, f.predicate, f.object`,
        )}) c WHERE 1 - c.distance >= ${s.contradictionBandMin}
      ),
      tw AS (
        SELECT a.i, b.i AS j, 1 - (a.v <=> b.v) AS sim FROM q a JOIN q b ON a.i < b.i
        WHERE 1 - (a.v <=> b.v) >= ${s.factDedupThreshold}
      ),
      ec AS (SELECT eq.i, c.id, c.sim, c.same_name FROM eq CROSS JOIN LATERAL (${existingEntitySql(deps, episode)}) c)
      SELECT 'fact' AS kind, i, NULL::bigint AS j, id, subject, predicate, object, sim, NULL::boolean AS same_name FROM fc
      UNION ALL
      SELECT 'twin', i, j, NULL, NULL, NULL, NULL, sim, NULL FROM tw
      UNION ALL
      SELECT 'entity', i, NULL, id, NULL, NULL, NULL, sim, same_name FROM ec`;
}

/**
 * The HNSW candidate list for extraction's searches. They look only for near-duplicates and
 * contradiction candidates (similarity at least contradictionBandMin), which a short list finds;
 * a database default raised for recall (200 before migration 0013; recall now sizes its own per
 * search) made extraction five times slower. `set_config(..., true)` lasts to the end of the
 * transaction, so it runs with the statement it serves in one batch (one round trip on Neon).
 */
const EXTRACTION_EF_SEARCH = 40;
const narrowSearch = sql`SELECT set_config('hnsw.ef_search', ${String(EXTRACTION_EF_SEARCH)}, true)`;

async function candidatesWithNarrowSearch(deps: Deps, statement: SQL): Promise<unknown> {
  const [, result] = await deps.database.batch((db) => [db.execute(narrowSearch), db.execute(statement)]);
  return result;
}

import { createHash } from "node:crypto";
import type { z } from "zod";
import { toDate } from "../db/rows";
import type { entities } from "../db/schema";
import { quoteComparable } from "../evidence/write";
import { storableInstant } from "../inputs";
import type { FactExtractionSchema } from "../llm/prompts";
import { flushTiny } from "../numbers";
import type { Settings } from "../settings/settings";
import type { DropReason } from "./report";
import { isUserSubject } from "./subject";

/**
 * The decisions of fact extraction, as pure functions over what the model proposed and what the
 * database found: which facts to keep (and why each other one is dropped), which pairs to send to
 * the contradiction judge, which old facts to end, which entities to create and what to link.
 * lib/semantic/extract.ts reads and writes around them.
 */

export type ProposedFact = z.infer<typeof FactExtractionSchema>["facts"][number];
export type ProposedEntity = z.infer<typeof FactExtractionSchema>["entities"][number];

/** A user message of the episode: quotes are checked against these. */
export interface UserLine {
  content: string;
  created_at: string;
}

/** A proposed fact that passed the checks, its parts trimmed and its subject "user". */
export interface KeptFact {
  /** Its position in the model's answer: the fact's id derives from it, so a retry reuses it. */
  ordinal: number;
  subject: "user";
  predicate: string;
  object: string;
  objectIsEntity: boolean;
  confidence: number;
  sourceQuote: string;
  validAt: Date;
}

export interface NewFact extends KeptFact {
  id: string;
  embedding: number[];
}

/** Text as quotes and duplicates are compared (quoteComparable: forgetting and recall compare alike). */
export const normalise = quoteComparable;

/** The sequence numbers of the user's lines that hold `quote`, compared as screenFact checks it. */
export function quotingSeqs(quote: string, userLines: readonly { seq: number; content: string }[]): number[] {
  const q = normalise(quote);
  return q.length === 0 ? [] : userLines.filter((m) => normalise(m.content).includes(q)).map((m) => m.seq);
}

export const stableId = (prefix: "fct" | "ent", ...parts: string[]) =>
  `${prefix}_${createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 20)}`;

interface QuoteLine {
  norm: string;
  created_at: string;
}

/** One proposed fact, kept as stored or the reason it is dropped (the first that applies). */
export function screenFact(
  f: ProposedFact,
  lines: readonly QuoteLine[],
  userNames: readonly string[],
): Omit<KeptFact, "ordinal"> | DropReason {
  if (!f.subject.trim() || !f.predicate.trim() || !f.object.trim()) return "emptyPart";
  if (!isUserSubject(f.subject, userNames)) return "notAboutUser";
  // The quote must really be the user's words: no invented quotes, no assistant lines.
  const quote = normalise(f.sourceQuote);
  const said = quote.length > 0 ? lines.find((m) => m.norm.includes(quote)) : undefined;
  if (!said) return "quoteNotFound";
  const stated = f.validAt ? new Date(f.validAt) : null;
  return {
    subject: "user",
    predicate: f.predicate.trim(),
    object: f.object.trim(),
    objectIsEntity: f.objectIsEntity,
    // Into 0-1, and below float4's normal range to 0: the column is a `real` (lib/numbers.ts).
    confidence: flushTiny(Math.min(1, Math.max(0, f.confidence))),
    sourceQuote: f.sourceQuote.trim(),
    // A date the model got wrong (unreadable, or a year the database cannot hold) is no date.
    validAt: stated && storableInstant(stated) ? stated : (toDate(said.created_at) as Date),
  };
}

/**
 * Claims about the user whose quote is the user's words, each (predicate, object) once: the
 * kept facts in the model's order, and one drop reason for every other proposed fact. Of a claim
 * stated twice the more confident is kept (the earlier on a tie): "maybe I live in Porto" (0.3)
 * then "yes, I live in Porto now" (0.95) is the confirmed claim, which recall shows and which may
 * end the old city; the hedge kept instead did neither.
 */
export function screenFacts(
  proposed: readonly ProposedFact[],
  userLines: readonly UserLine[],
  userNames: readonly string[],
): { kept: KeptFact[]; drops: DropReason[] } {
  const lines = userLines.map((m) => ({ norm: normalise(m.content), created_at: m.created_at }));
  const seen = new Map<string, number>();
  const kept: KeptFact[] = [];
  const drops: DropReason[] = [];
  proposed.forEach((f, ordinal) => {
    const screened = screenFact(f, lines, userNames);
    if (typeof screened === "string") {
      drops.push(screened);
      return;
    }
    const key = `${normalise(screened.predicate)}\u0000${normalise(screened.object)}`;
    const at = seen.get(key);
    if (at !== undefined) {
      drops.push("duplicate");
      if (screened.confidence > kept[at].confidence) kept[at] = { ordinal, ...screened };
      return;
    }
    seen.set(key, kept.length);
    kept.push({ ordinal, ...screened });
  });
  return { kept, drops };
}

/**
 * The longest entity name kept: a name is a name, not a sentence, and the unique index on a
 * dataset's names holds at most 2,704 bytes a row, a dataset's name (up to 1,024 bytes) included.
 * A model that took a user's 3,000-letter words for an organisation failed the extraction of the
 * episode's every fact, on every retry.
 */
export const ENTITY_NAME_MAX = 200;

/** Entities named (not blank, at most ENTITY_NAME_MAX characters), each (type, name) once, names trimmed. */
export function screenEntities(proposed: readonly ProposedEntity[]): ProposedEntity[] {
  const seen = new Set<string>();
  return proposed
    .map((e) => ({ name: e.name.trim(), type: e.type }))
    .filter((e) => {
      const key = `${e.type}\u0000${normalise(e.name)}`;
      if (!normalise(e.name) || e.name.length > ENTITY_NAME_MAX || seen.has(key)) return false;
      seen.add(key);
      return true;
    });
}

/** A live fact near kept fact number `i` (1-based), at or above the contradiction band. */
export interface StoredNeighbour {
  i: number;
  id: string;
  subject: string | null;
  predicate: string | null;
  object: string | null;
  sim: number;
}

/** Kept facts `i` < `j` (1-based) at or above the dedup threshold of each other. */
export interface Twin {
  i: number;
  j: number;
}

export interface JudgePair {
  pair: number;
  oldId: string;
  old: string;
  /** Index into the accepted facts. */
  newIndex: number;
}

/**
 * Dedup against live facts and within the batch (an earlier kept fact wins), and the contradiction
 * pairs of the accepted ones. Every similarity comes from the database, so a pair inside one
 * extraction and the same pair across two extractions meet the thresholds alike.
 */
export function decideFacts(
  kept: readonly KeptFact[],
  vectors: readonly number[][],
  found: { facts: readonly StoredNeighbour[]; twins: readonly Twin[] },
  s: Pick<Settings["semantic"], "factDedupThreshold" | "retrievalMinConfidence">,
  episodeId: string,
): { accepted: NewFact[]; pairs: JudgePair[]; drops: DropReason[] } {
  const accepted: NewFact[] = [];
  const acceptedIndex = new Set<number>();
  const pairs: JudgePair[] = [];
  const drops: DropReason[] = [];
  kept.forEach((f, i) => {
    const mine = found.facts.filter((c) => c.i === i + 1);
    const duplicate =
      mine.some((c) => c.sim >= s.factDedupThreshold) ||
      found.twins.some((t) => t.j === i + 1 && acceptedIndex.has(t.i - 1));
    if (duplicate) {
      drops.push("duplicate");
      return;
    }
    acceptedIndex.add(i);
    accepted.push({ ...f, id: stableId("fct", episodeId, String(f.ordinal)), embedding: vectors[i] });
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
  return { accepted, pairs, drops };
}

/** The judge's input: every pair at once. */
export function judgeInput(pairs: readonly JudgePair[], accepted: readonly NewFact[]): string {
  return pairs
    .map((p) => {
      const n = accepted[p.newIndex];
      return `Pair ${p.pair}:\nOLD: ${p.old}\nNEW: ${n.subject} ${n.predicate} ${n.object}`;
    })
    .join("\n\n");
}

/** A new fact that ends an old one, from its own validAt (the time the old stopped being true). */
export interface Ending {
  newId: string;
  until: Date;
  sourceQuote: string;
}

/**
 * The old facts a contradiction ends, each with the new facts that contradict it. The write ends
 * an old fact at the validAt of the earliest of them whose words were not forgotten meanwhile
 * (endFacts). Judgements for pairs never asked are ignored.
 */
export function invalidations(
  pairs: readonly JudgePair[],
  judgements: readonly { pair: number; contradicts: boolean }[],
  accepted: readonly NewFact[],
): Map<string, Ending[]> {
  const ended = new Map<string, Ending[]>();
  for (const j of judgements) {
    const p = pairs.find((x) => x.pair === j.pair);
    if (!j.contradicts || !p) continue;
    const { id: newId, validAt: until, sourceQuote } = accepted[p.newIndex];
    const by = { newId, until, sourceQuote };
    const current = ended.get(p.oldId) ?? [];
    if (!current.some((e) => e.newId === by.newId)) ended.set(p.oldId, [...current, by]);
  }
  return ended;
}

/** The same-type entity named alike or nearest to new entity number `i` (1-based). */
export interface EntityMatch {
  i: number;
  id: string;
  sim: number;
  sameName: boolean;
}

/** An entity of the extraction by the name it was proposed under: what facts naming it link to. */
export interface NamedEntity {
  name: string;
  id: string;
}

/** Cosine similarity of two vectors (0 when either is all zeros). */
export function cosineSimilarity(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let k = 0; k < a.length; k++) {
    dot += a[k] * (b[k] ?? 0);
    aa += a[k] * a[k];
    bb += (b[k] ?? 0) * (b[k] ?? 0);
  }
  return aa === 0 || bb === 0 ? 0 : dot / Math.sqrt(aa * bb);
}

/**
 * Entity resolution: an existing entity of the same type absorbs the new one when it has the same
 * name (case-insensitive) or is close enough (similarity above `threshold`), and so does a new one
 * of the same type earlier in the same answer ("Acme Corp", then "Acme Corporation": one row, as
 * across two episodes); the others become rows with ids derived from the dataset, type and name
 * (so a retry or a twin extraction hits the same row). Each proposed entity keeps its own name
 * for linking, with its type's id: "Apple" the ORG and "Apple" the PRODUCT are two entities a
 * fact naming Apple links to.
 */
export function resolveEntities(
  proposed: readonly ProposedEntity[],
  vectors: readonly number[][],
  matches: readonly EntityMatch[],
  threshold: number,
  scope: { projectId: string; dataset: string; now: Date },
): { named: NamedEntity[]; rows: (typeof entities.$inferInsert)[] } {
  const named: NamedEntity[] = [];
  const rows: (typeof entities.$inferInsert)[] = [];
  const created: { type: string; vector: readonly number[]; id: string }[] = [];
  proposed.forEach((e, i) => {
    const match = matches.find((c) => c.i === i + 1);
    if (match && (match.sameName || match.sim > threshold)) {
      named.push({ name: normalise(e.name), id: match.id });
      return;
    }
    const twin = created.find((c) => c.type === e.type && cosineSimilarity(c.vector, vectors[i]) > threshold);
    if (twin) {
      named.push({ name: normalise(e.name), id: twin.id });
      return;
    }
    const id = stableId("ent", scope.projectId, scope.dataset, e.type, normalise(e.name));
    named.push({ name: normalise(e.name), id });
    created.push({ type: e.type, vector: vectors[i], id });
    rows.push({
      id,
      projectId: scope.projectId,
      dataset: scope.dataset,
      name: e.name,
      type: e.type,
      embedding: vectors[i],
      createdAt: scope.now,
    });
  });
  return { named, rows };
}

/** Text as whole words: lower case, every run of other characters one space, padded. */
const words = (s: string) => {
  const text = normalise(s)
    .replace(/[^\p{L}\p{N}]+/gu, " ")
    .trim();
  return ` ${text} `;
};

/**
 * A link from each accepted fact to every entity of the extraction its object or subject names,
 * as all of it ("Lisbon") or as whole words within it ("Noor works at Bosch in Denver": Noor,
 * Bosch and Denver), so a question about one of them finds the fact.
 */
export function factLinks(accepted: readonly NewFact[], entities: readonly NamedEntity[]) {
  const named = entities.map(({ name, id }) => ({ id, words: words(name) })).filter((e) => e.words.trim());
  return accepted.flatMap((f) => {
    const text = `${words(f.object)}${words(f.subject)}`;
    const ids = new Set(named.filter((e) => text.includes(e.words)).map((e) => e.id));
    return [...ids].map((entityId) => ({ factId: f.id, entityId }));
  });
}

import { copyBinary } from "./copy-binary";
import { benchEmbedding } from "./embedding";

export const ADJECTIVES = [
  "green",
  "spicy",
  "quiet",
  "vintage",
  "electric",
  "tiny",
  "nordic",
  "urban",
  "wild",
  "golden",
];
export const NOUNS = [
  "tea",
  "jazz",
  "bicycle",
  "garden",
  "novel",
  "camera",
  "guitar",
  "kayak",
  "chess",
  "bakery",
  "opera",
  "hiking",
];
const PREDICATES = ["likes", "owns", "visited", "plans", "studies", "avoids", "collects", "recommends"];

/** The i-th seeded fact: a few words from small vocabularies plus a unique token. */
export const factWords = (i: number) => {
  const a = ADJECTIVES[i % ADJECTIVES.length];
  const n = NOUNS[Math.floor(i / ADJECTIVES.length) % NOUNS.length];
  const p = PREDICATES[Math.floor(i / 7) % PREDICATES.length];
  return { predicate: p, object: `${a} ${n} number ${i}` };
};

/** A chunk of a dataset's seeded facts: facts `from` to `to` (exclusive). */
export interface FactChunkRequest {
  projectId: string;
  dataset: string;
  from: number;
  to: number;
  /** The dataset's entities: fact i touches entity i mod entityCount. */
  entityCount: number;
  dims: number;
}

/** A chunk's rows as COPY input: the facts in binary COPY format, their links as CSV. */
export interface FactChunk {
  facts: Uint8Array<ArrayBuffer>;
  links: Uint8Array<ArrayBuffer>;
}

/** The columns of FactChunk.facts, in order. */
export const FACT_COLUMNS =
  "id, project_id, dataset, subject, predicate, object, confidence, source_quote, valid_at, embedding";

/** The rows of one chunk of seeded facts (pure: the same request gives the same bytes). */
export function factChunk(at: FactChunkRequest): FactChunk {
  const text = (value: string) => ({ text: value });
  const facts = [];
  const links: string[] = [];
  for (let i = at.from; i < at.to; i++) {
    const f = factWords(i);
    const id = `fct_${at.dataset}_${i}`;
    facts.push([
      ...[id, at.projectId, at.dataset, "user", f.predicate, f.object].map(text),
      { real: 0.9 },
      text("I said so"),
      { timestamptz: new Date(Date.UTC(2025, 0, 1) + i * 60_000) },
      { halfvec: benchEmbedding(`user ${f.predicate} ${f.object}`, at.dims) },
    ]);
    links.push(`${id},ent_${at.dataset}_${i % at.entityCount}`);
  }
  return { facts: copyBinary(facts), links: new TextEncoder().encode(links.join("\n")) };
}

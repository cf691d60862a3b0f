import type { z } from "zod";
import type { ENTITY_TYPES, FactExtractionSchema } from "../lib/llm/prompts";

/**
 * The demo provider's "model": a few sentence patterns over what the user said, so the whole
 * memory loop (summary, facts, contradictions, recall) runs on a machine without any model. It
 * answers in the shapes of lib/llm/prompts.ts; it understands nothing beyond the patterns below.
 */

/** One transcript line as the service renders it: `[sequence] role: text`. */
export interface Line {
  role: string;
  text: string;
}

/** The extraction answer, in the schema the service asks the model for. */
export type DemoExtraction = z.infer<typeof FactExtractionSchema>;
export type DemoFact = DemoExtraction["facts"][number];
export type EntityType = (typeof ENTITY_TYPES)[number];

export function parseTranscript(text: string): Line[] {
  return [...text.matchAll(/^\[\d+\] (\w+): (.*)$/gm)].map((m) => ({ role: m[1], text: m[2] }));
}

/** A run of capitalised words ("Lisbon", "New York", "Rio de Janeiro", "Santa Maria"). */
const NAME = /\p{Lu}[\p{L}\p{N}'’&-]*(?:\s+(?:(?:de|da|do|del|of|the|on|upon|am)\s+)?\p{Lu}[\p{L}\p{N}'’&-]*)*/u;
/** Words that end the object of a clause ("a nurse at ...", "Lisbon last spring"). */
const STOP =
  /\s+(?:at|in|for|from|since|with|because|but|and|so|when|while|last|this|next|ago|years?|months?|weeks?|now|today|recently)\b.*$/i;

const clean = (s: string) =>
  s
    .replace(/[\s,;:.!?)"”]+$/u, "")
    .replace(/^(?:a|an|the)\s+/i, "")
    .trim();

/** The clause's object: a capitalised name when there is one at its start, else its words up to a stop word. */
function objectOf(rest: string, wantName: boolean): { object: string; isName: boolean } | undefined {
  const head = rest.replace(/^(?:a|an|the)\s+/i, "");
  if (wantName) {
    const name = head.match(NAME);
    if (name && name.index === 0) return { object: clean(name[0]), isName: true };
  }
  const object = clean(head.replace(STOP, ""));
  return object ? { object, isName: false } : undefined;
}

interface Rule {
  pattern: RegExp;
  predicate: string;
  /** Entity type of a capitalised object; undefined: the object is never an entity. */
  type?: EntityType;
}

const I_AM = "I(?:['’]m| am)";
const RULES: Rule[] = [
  { pattern: /\bmy name is\s+(.+)/i, predicate: "is_named", type: "PERSON" },
  {
    pattern: new RegExp(String.raw`\b(?:I (?:live|reside)|${I_AM} (?:living|based)) in\s+(.+)`, "i"),
    predicate: "lives_in",
    type: "PLACE",
  },
  {
    pattern: /\bI(?:['’]ve| have)? (?:just |recently )?(?:moved|relocated) to\s+(.+)/i,
    predicate: "lives_in",
    type: "PLACE",
  },
  { pattern: /\bI(?:['’]m| am)? from\s+(.+)/i, predicate: "comes_from", type: "PLACE" },
  { pattern: /\bI work (?:at|for)\s+(.+)/i, predicate: "works_at", type: "ORG" },
  { pattern: /\bI work as\s+(.+)/i, predicate: "works_as" },
  { pattern: new RegExp(String.raw`\b${I_AM} allergic to\s+(.+)`, "i"), predicate: "allergic_to" },
  { pattern: /\bI (?:really )?(?:like|love|enjoy|adore)\s+(.+)/i, predicate: "likes", type: "OTHER" },
  { pattern: /\bI (?:really )?(?:dislike|hate|can['’]t stand)\s+(.+)/i, predicate: "dislikes", type: "OTHER" },
  { pattern: /\bI prefer\s+(.+)/i, predicate: "prefers", type: "OTHER" },
];

/** Sentences of a user line, verbatim (so each one is a valid sourceQuote). */
function sentences(text: string): string[] {
  return (text.match(/[^.!?]+[.!?]*/g) ?? []).map((s) => s.trim()).filter(Boolean);
}

/** Facts the user's lines state, by the patterns above; the quote is the sentence, verbatim. */
export function extractFacts(lines: Line[]): DemoExtraction {
  const facts: DemoFact[] = [];
  const entities = new Map<string, { name: string; type: EntityType }>();
  for (const line of lines.filter((l) => l.role === "user")) {
    for (const sentence of sentences(line.text)) {
      // "I work as a nurse at Santa Maria": both rules see the sentence, each from its own match.
      for (const rule of RULES) {
        const m = sentence.match(rule.pattern);
        if (!m) continue;
        const found = objectOf(m[1], rule.type !== undefined);
        if (!found) continue;
        const isEntity = found.isName && rule.type !== undefined;
        if (facts.some((f) => f.predicate === rule.predicate && f.object === found.object)) continue;
        facts.push({
          subject: "user",
          predicate: rule.predicate,
          object: found.object,
          objectIsEntity: isEntity,
          confidence: 0.9,
          sourceQuote: sentence,
          validAt: null,
        });
        if (isEntity && rule.type) entities.set(found.object.toLowerCase(), { name: found.object, type: rule.type });
      }
      // "... at Santa Maria hospital" after "I work as": the workplace too.
      const at = sentence.match(/\bI work as\s+.+?\s+(?:at|for)\s+(.+)/i);
      const place = at ? objectOf(at[1], true) : undefined;
      if (place?.isName && !facts.some((f) => f.predicate === "works_at" && f.object === place.object)) {
        facts.push({
          subject: "user",
          predicate: "works_at",
          object: place.object,
          objectIsEntity: true,
          confidence: 0.9,
          sourceQuote: sentence,
          validAt: null,
        });
        entities.set(place.object.toLowerCase(), { name: place.object, type: "ORG" });
      }
    }
  }
  return { facts, entities: [...entities.values()] };
}

const PHRASES: Record<string, string> = {
  is_named: "is named",
  lives_in: "lives in",
  comes_from: "comes from",
  works_at: "works at",
  works_as: "works as",
  allergic_to: "is allergic to",
  likes: "likes",
  dislikes: "dislikes",
  prefers: "prefers",
};

/** `episode_summary`: what the user said, in the third person, and the facts as key learnings. */
export function summarise(lines: Line[]): { summary: string; keyLearnings: string[] } {
  const said = lines.filter((l) => l.role === "user").map((l) => l.text.trim());
  const others = lines.length - said.length;
  const quoted = said.map((s) => `"${s.length > 200 ? `${s.slice(0, 197)}...` : s}"`).join(" ");
  const summary =
    said.length === 0
      ? `The assistant wrote ${others} message(s); the user said nothing.`
      : `The user wrote ${said.length} message(s) and the assistant ${others}. The user said: ${quoted}`;
  const keyLearnings = extractFacts(lines).facts.map((f) => {
    const article = f.predicate === "works_as" ? (/^[aeiou]/i.test(f.object) ? "an " : "a ") : "";
    return `The user ${PHRASES[f.predicate] ?? f.predicate.replace(/_/g, " ")} ${article}${f.object}.`;
  });
  return { summary: summary.length > 1500 ? `${summary.slice(0, 1497)}...` : summary, keyLearnings };
}

/** Predicates a user has one value of at a time: a new object replaces the old one. */
const SINGLE_VALUED = new Set(["is_named", "lives_in", "works_at", "works_as"]);

/** `contradiction_judgement`: pairs as the service sends them (`Pair n:\nOLD: s p o\nNEW: s p o`). */
export function judge(text: string): { judgements: { pair: number; contradicts: boolean }[] } {
  const judgements = [...text.matchAll(/Pair (\d+):\nOLD: (.*)\nNEW: (.*)/g)].map((m) => {
    const [, oldPredicate, ...oldObject] = m[2].split(" ");
    const [, newPredicate, ...newObject] = m[3].split(" ");
    const contradicts =
      oldPredicate === newPredicate &&
      SINGLE_VALUED.has(newPredicate) &&
      oldObject.join(" ").toLowerCase() !== newObject.join(" ").toLowerCase();
    return { pair: Number(m[1]), contradicts };
  });
  return { judgements };
}

/**
 * The line the demo provider prints for a chat turn: what the user said and the system block
 * after `prompt` (the fixed chat prompt: the application's instructions and the facts recall put
 * there), newlines shown as ` ⏎ `, so watching its terminal shows what memory added to the turn.
 */
export function chatRequestLine(prompt: string, system: string, user: string): string {
  const oneLine = (text: string) => text.trim().replace(/\s*\n\s*/g, " ⏎ ");
  const said = oneLine(user);
  const block = oneLine(system.startsWith(prompt) ? system.slice(prompt.length) : system);
  return `chat: user said "${said.length > 120 ? `${said.slice(0, 117)}...` : said}"; system block: ${block || "(nothing recalled)"}`;
}

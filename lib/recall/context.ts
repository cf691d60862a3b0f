import type { Fact } from "../semantic/facts";
import { headOf, oneLine } from "../text";

/** A fact as recall ranks it: the spec's Fact plus the anchor group it is rendered under. */
export interface RankedFact extends Fact {
  /** The anchor entity's name, else the entity the fact touches, else its subject. */
  groupName: string;
  /** 1 for the most relevant fact: groups may render a fact before better-ranked ones. */
  rank: number;
}

export interface FactGroup {
  entityName: string;
  facts: Pick<Fact, "subject" | "predicate" | "object" | "sourceQuote" | "validAt" | "validUntil" | "relevanceScore">[];
  /** The best relevanceScore in the group (its first fact's): groups are ordered by it. */
  groupRelevance: number;
}

export const CONTEXT_LEAD = "Known facts about the user, most relevant first.";
export const FACTS_HEADING = "# FACTS (format: fact (valid: from - to))";
export const ENTITIES_HEADING = "# ENTITIES";
export const MESSAGES_HEADING = "# CONVERSATION (format: [date] role: words, most relevant first)";

/**
 * A message's line keeps its first 240 characters (about 60 tokens), cut at a word: a statement
 * of fact in a chat turn is usually its first sentence or two, and 4 lines of this keep the block
 * near 450 tokens with 8 facts (docs/memory.md, measured on bench:quality).
 */
export const MESSAGE_LINE_CHARS = 240;

/** A fact as a sentence: subject, predicate with its underscores read as spaces, object. */
export const factText = (f: Pick<Fact, "subject" | "predicate" | "object">) =>
  oneLine(`${f.subject} ${f.predicate.replaceAll("_", " ")} ${f.object}`);

/** The calendar date (UTC) of an ISO datetime. */
const day = (iso: string) => iso.slice(0, 10);

/**
 * Groups facts by anchor entity, keeping the order they arrive in (relevance first): a group
 * appears where its best fact ranks, and its facts follow in rank order.
 */
export function groupFacts(facts: RankedFact[]): FactGroup[] {
  const groups = new Map<string, FactGroup>();
  for (const f of facts) {
    let group = groups.get(f.groupName);
    if (!group) {
      group = { entityName: f.groupName, facts: [], groupRelevance: f.relevanceScore };
      groups.set(f.groupName, group);
    }
    group.groupRelevance = Math.max(group.groupRelevance, f.relevanceScore);
    group.facts.push({
      subject: f.subject,
      predicate: f.predicate,
      object: f.object,
      sourceQuote: f.sourceQuote,
      validAt: f.validAt,
      validUntil: f.validUntil,
      relevanceScore: f.relevanceScore,
    });
  }
  return [...groups.values()];
}

/**
 * The entities the facts touch, in the order the block shows them: by the first fact that touches
 * each, in rendering order (groupFacts' order: a group where its best fact ranks); a fact's own
 * entities in the order they come with it.
 */
export function touchedEntities(
  facts: (Pick<RankedFact, "groupName"> & { entities: { name: string; type: string }[] })[],
): { name: string; type: string }[] {
  const groupOrder = new Map<string, number>();
  for (const f of facts) if (!groupOrder.has(f.groupName)) groupOrder.set(f.groupName, groupOrder.size);
  // A stable sort by group keeps rank order within each group.
  const placed = [...facts].sort((a, b) => (groupOrder.get(a.groupName) ?? 0) - (groupOrder.get(b.groupName) ?? 0));
  const seen = new Map<string, { name: string; type: string }>();
  for (const f of placed) {
    for (const e of f.entities) {
      const key = `${e.type}\u0000${e.name}`;
      if (!seen.has(key)) seen.set(key, { name: e.name, type: e.type });
    }
  }
  return [...seen.values()];
}

/** One line of at most `max` characters: cut at the last space within it, marked with an ellipsis. */
export function trimmed(text: string, max = MESSAGE_LINE_CHARS): string {
  const line = oneLine(text);
  if (line.length <= max) return line;
  const cut = headOf(line, max - 1);
  const space = cut.lastIndexOf(" ");
  return `${(space > max / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** A message as the block shows it (the fields of RecalledMessage it renders). */
export interface BlockMessage {
  role: string;
  content: string;
  createdAt: string;
}

/**
 * The prompt-ready block: deterministic (same rows, same text), no model involved. Facts in
 * group order, then the entities they touch, then (when recall includes them) the messages under
 * their own heading, one trimmed line each; the empty string when there is nothing.
 * sourceQuote and confidence are stored but not rendered. Without messages the block is the
 * spec's.
 */
export function renderContext(
  groups: FactGroup[],
  entities: { name: string; type: string }[],
  messages: BlockMessage[] = [],
): string {
  const lines: string[] = [];
  if (groups.length > 0) {
    lines.push(CONTEXT_LEAD, "", FACTS_HEADING);
    for (const group of groups) {
      for (const f of group.facts) {
        lines.push(`- ${factText(f)} (valid: ${day(f.validAt)} - ${f.validUntil ? day(f.validUntil) : "present"})`);
      }
    }
    lines.push("", ENTITIES_HEADING);
    for (const e of entities) lines.push(`- ${oneLine(e.name)} (${oneLine(e.type)})`);
  }
  if (messages.length > 0) {
    if (lines.length > 0) lines.push("");
    lines.push(MESSAGES_HEADING);
    for (const m of messages) lines.push(`- [${day(m.createdAt)}] ${m.role}: ${trimmed(m.content)}`);
  }
  return lines.join("\n");
}

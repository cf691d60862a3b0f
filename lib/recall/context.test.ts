import { describe, expect, it } from "vitest";
import {
  CONTEXT_LEAD,
  ENTITIES_HEADING,
  FACTS_HEADING,
  type FactGroup,
  MESSAGE_LINE_CHARS,
  MESSAGES_HEADING,
  renderContext,
  trimmed,
} from "./context";

const fact = { subject: "user", predicate: "lives_in", object: "Lisbon", sourceQuote: "I live in Lisbon" };
const groups: FactGroup[] = [
  {
    entityName: "Lisbon",
    groupRelevance: 1,
    facts: [{ ...fact, validAt: "2026-03-01T00:00:00.000Z", validUntil: null, relevanceScore: 1 }],
  },
];
const entities = [{ name: "Lisbon", type: "PLACE" }];
const message = { role: "user", content: "I work\nas a nurse.", createdAt: "2026-05-02T10:00:00.000Z" };

describe("renderContext", () => {
  it("is the spec's block without messages", () => {
    expect(renderContext(groups, entities)).toBe(
      [
        CONTEXT_LEAD,
        "",
        FACTS_HEADING,
        "- user lives in Lisbon (valid: 2026-03-01 - present)",
        "",
        ENTITIES_HEADING,
        "- Lisbon (PLACE)",
      ].join("\n"),
    );
    expect(renderContext(groups, entities, [])).toBe(renderContext(groups, entities));
    expect(renderContext([], [])).toBe("");
  });

  it("puts the messages after the entities under their own heading, one dated line each", () => {
    expect(renderContext(groups, entities, [message]).split("\n").slice(-3)).toEqual([
      "",
      MESSAGES_HEADING,
      "- [2026-05-02] user: I work as a nurse.",
    ]);
  });

  it("renders messages alone when no fact matched", () => {
    expect(renderContext([], [], [message])).toBe(`${MESSAGES_HEADING}\n- [2026-05-02] user: I work as a nurse.`);
  });
});

/** With the u flag, \p{Cs} matches only a surrogate without its pair. */
const LONE_SURROGATE = /\p{Cs}/u;

describe("trimmed", () => {
  it("keeps a short text whole, on one line", () => {
    expect(trimmed("  a\n b  ")).toBe("a b");
  });

  it("cuts a long text at a word within the limit, with an ellipsis", () => {
    const text = "word ".repeat(100);
    const line = trimmed(text);
    expect(line.length).toBeLessThanOrEqual(MESSAGE_LINE_CHARS);
    expect(line.endsWith("word…")).toBe(true);
  });

  it("cuts a text without spaces at the limit", () => {
    expect(trimmed("x".repeat(500), 10)).toBe(`${"x".repeat(9)}…`);
  });

  it("never cuts an emoji in half", () => {
    // 239 units keep 119 emoji and half of the 120th.
    const line = trimmed("😀".repeat(200));
    expect(line).not.toMatch(LONE_SURROGATE);
    expect(line).toBe(`${"😀".repeat(119)}…`);
    expect(trimmed(`x${"😀".repeat(200)}`)).toBe(`x${"😀".repeat(119)}…`);
  });
});

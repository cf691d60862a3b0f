import { describe, expect, it } from "vitest";
import { type RecalledMessage, skipQuoted } from "./messages";

const message = (messageId: string, content: string): RecalledMessage => ({
  messageId,
  threadId: "thr_1",
  role: "user",
  content,
  createdAt: "2026-05-02T10:00:00.000Z",
  relevanceScore: 1,
});

describe("skipQuoted", () => {
  const candidates = [
    message("a", "Yesterday I adopted   a cat\nnamed Miso."),
    message("b", "The cat sleeps on my keyboard."),
    message("c", "I like tea."),
  ];

  it("skips a message a fact quotes (whitespace and case aside) and keeps the order", () => {
    expect(skipQuoted(candidates, [{ sourceQuote: "I adopted a cat named miso" }], 5).map((m) => m.messageId)).toEqual([
      "b",
      "c",
    ]);
  });

  it("keeps at most `limit`, after skipping", () => {
    expect(skipQuoted(candidates, [{ sourceQuote: "adopted a cat" }], 1).map((m) => m.messageId)).toEqual(["b"]);
    expect(skipQuoted(candidates, [], 2).map((m) => m.messageId)).toEqual(["a", "b"]);
  });

  it("ignores an empty quote", () => {
    expect(skipQuoted(candidates, [{ sourceQuote: "  " }], 5)).toHaveLength(3);
  });
});

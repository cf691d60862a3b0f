import { describe, expect, it } from "vitest";
import { blockMessages, type RecalledMessage } from "./messages";

const message = (messageId: string, content: string): RecalledMessage => ({
  messageId,
  threadId: "thr_1",
  role: "user",
  content,
  createdAt: "2026-05-02T10:00:00.000Z",
  relevanceScore: 1,
});

describe("blockMessages", () => {
  const candidates = [
    message("a", "Yesterday I adopted   a cat\nnamed Miso."),
    message("b", "The cat sleeps on my keyboard."),
    message("c", "I like tea."),
  ];

  it("skips a message a fact quotes (whitespace and case aside) and keeps the order", () => {
    expect(
      blockMessages(candidates, [{ sourceQuote: "I adopted a cat named miso" }], 5).map((m) => m.messageId),
    ).toEqual(["b", "c"]);
  });

  it("keeps at most `limit`, after skipping", () => {
    expect(blockMessages(candidates, [{ sourceQuote: "adopted a cat" }], 1).map((m) => m.messageId)).toEqual(["b"]);
    expect(blockMessages(candidates, [], 2).map((m) => m.messageId)).toEqual(["a", "b"]);
  });

  it("keeps one of messages saying the same (whitespace and case aside): the first, the best", () => {
    const repeated = [
      message("a", "Hello, I have a few updates."),
      message("b", "hello, I have  a few updates."),
      message("c", "I like tea."),
      message("d", "HELLO, I have a few updates."),
      message("e", "I like green tea."),
    ];
    expect(blockMessages(repeated, [], 5).map((m) => m.messageId)).toEqual(["a", "c", "e"]);
    expect(blockMessages(repeated, [], 2).map((m) => m.messageId)).toEqual(["a", "c"]);
  });

  it("ignores an empty quote", () => {
    expect(blockMessages(candidates, [{ sourceQuote: "  " }], 5)).toHaveLength(3);
  });
});

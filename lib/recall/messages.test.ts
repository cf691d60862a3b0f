import { describe, expect, it } from "vitest";
import { blockMessages, holdsWords, type QuoteSource, type RecalledMessage } from "./messages";

const message = (
  messageId: string,
  content: string,
  seq = 1,
  threadId = "thr_1",
): RecalledMessage & { seq: number } => ({
  messageId,
  threadId,
  role: "user",
  content,
  truncated: false,
  createdAt: "2026-05-02T10:00:00.000Z",
  relevanceScore: 1,
  seq,
});

const quoting = (sourceQuote: string, factId = "fct_1") => ({ factId, sourceQuote });
const none = new Map<string, QuoteSource>();

describe("blockMessages", () => {
  const candidates = [
    message("a", "Yesterday I adopted   a cat\nnamed Miso."),
    message("b", "The cat sleeps on my keyboard."),
    message("c", "I like tea."),
  ];
  const ids = (ms: { messageId: string }[]) => ms.map((m) => m.messageId);

  it("skips a message a fact quotes (whitespace and case aside) and keeps the order", () => {
    expect(ids(blockMessages(candidates, [quoting("I adopted a cat named miso")], none, 5))).toEqual(["b", "c"]);
  });

  it("keeps at most `limit`, after skipping", () => {
    expect(ids(blockMessages(candidates, [quoting("adopted a cat")], none, 1))).toEqual(["b"]);
    expect(ids(blockMessages(candidates, [], none, 2))).toEqual(["a", "b"]);
  });

  it("keeps one of messages saying the same (whitespace and case aside): the first, the best", () => {
    const repeated = [
      message("a", "Hello, I have a few updates."),
      message("b", "hello, I have  a few updates."),
      message("c", "I like tea."),
      message("d", "HELLO, I have a few updates."),
      message("e", "I like green tea."),
    ];
    expect(ids(blockMessages(repeated, [], none, 5))).toEqual(["a", "c", "e"]);
    expect(ids(blockMessages(repeated, [], none, 2))).toEqual(["a", "c"]);
  });

  it("ignores an empty quote", () => {
    expect(blockMessages(candidates, [quoting("  ")], none, 5)).toHaveLength(3);
  });

  it("skips only a message holding the quote as whole words", () => {
    const words = [message("a", "Tomorrow I fly to Oslo."), message("b", "Tom is my brother.")];
    expect(ids(blockMessages(words, [quoting("Tom")], none, 5))).toEqual(["a"]);
  });

  it("for a fact from an episode, skips only that episode's messages: a later repeat with news stays", () => {
    const sources = new Map([["fct_1", { threadId: "thr_1", fromSeq: 1, toSeq: 4 }]]);
    const thread = [
      message("said", "I love coffee.", 2),
      message("later", "I love coffee, but I quit it last week for green tea.", 9),
      message("elsewhere", "I love coffee!", 2, "thr_2"),
    ];
    expect(ids(blockMessages(thread, [quoting("I love coffee")], sources, 5))).toEqual(["later", "elsewhere"]);
    // A fact written through the API names no episode: any message holding its words.
    expect(ids(blockMessages(thread, [quoting("I love coffee", "fct_api")], sources, 5))).toEqual([]);
  });
});

describe("holdsWords", () => {
  it("finds the quote between word edges, anywhere it occurs", () => {
    expect(holdsWords("tomorrow, tom said", "tom")).toBe(true);
    expect(holdsWords("tomorrow", "tom")).toBe(false);
    expect(holdsWords("atom", "tom")).toBe(false);
    expect(holdsWords("i live in lisbon.", "i live in lisbon")).toBe(true);
    expect(holdsWords("café", "caf")).toBe(false);
    expect(holdsWords("cafe\u0301", "cafe")).toBe(false);
  });

  it("needs no edge where the quote itself starts or ends with punctuation", () => {
    expect(holdsWords("well...ok", "...")).toBe(true);
    expect(holdsWords("(home)", "home)")).toBe(true);
  });
});

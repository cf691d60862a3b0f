import { headOf, oneLine } from "../text";
import { isLengthRefusal } from "./client";

export interface TranscriptMessage {
  seq: number;
  role: string;
  content: string;
}

/** How many of the first messages a truncated transcript keeps (the spec's "first 20"). */
export const TRANSCRIPT_HEAD = 20;

/**
 * At most `maxMessages` messages: all of them when they fit, else the first 20, a marker saying
 * how many were left out, then the tail (`maxMessages - 20` messages), as the spec says. A cap of
 * 20 or less cannot keep 20 messages and a tail, so there the head is half the cap (rounded up)
 * and the tail the rest, which still keeps both ends of the conversation.
 */
export function truncateTranscript(messages: TranscriptMessage[], maxMessages: number) {
  if (messages.length <= maxMessages) return { messages, omitted: 0, headCount: messages.length };
  const head = maxMessages > TRANSCRIPT_HEAD ? TRANSCRIPT_HEAD : Math.ceil(maxMessages / 2);
  const tail = maxMessages - head;
  return {
    messages: [...messages.slice(0, head), ...messages.slice(messages.length - tail)],
    omitted: messages.length - head - tail,
    headCount: head,
  };
}

/**
 * One line per message, the transcript's messages together at most `budget` characters
 * (fitTexts); the marker sits where messages were left out.
 */
export function renderTranscript(
  messages: TranscriptMessage[],
  maxMessages: number,
  budget = TRANSCRIPT_BUDGET_CHARS,
): string {
  const t = truncateTranscript(messages, maxMessages);
  const lines = transcriptLines(t.messages, budget);
  if (t.omitted > 0) lines.splice(t.headCount, 0, `[... ${t.omitted} messages omitted ...]`);
  return lines.join("\n");
}

/** `[seq] role: text`, one line a message, their texts cut to fit `budget` together (fitTexts). */
export function transcriptLines(messages: TranscriptMessage[], budget: number): string[] {
  const lines = messages.map((m) => oneLine(m.content));
  const texts = fitTexts(lines, budget);
  return messages.map((m, i) => `[${m.seq}] ${m.role}: ${texts[i]}`);
}

/**
 * How many characters of the messages a model is sent in one prompt (a transcript to summarise,
 * extract from or fold): about 24,000 tokens of English, inside a 32,000-token window (the local
 * models of docs/local-models.md) with the instructions and the answer. The spec's cut by message
 * count (maxMessages) comes first; this one bounds what a few long messages (a pasted log, a
 * message may be 1 MB) would add, which a model refuses whole, run after run.
 */
export const TRANSCRIPT_BUDGET_CHARS = 96_000;

/** A message is never cut shorter than this (its head still says what it was). */
export const MIN_MESSAGE_CHARS = 200;

/**
 * The texts, together at most `budget` characters: all whole when they fit, else the longest cut
 * to the same length (their heads, ending between graphemes, with a marker saying how much was
 * left out) and the short ones whole, but none cut below MIN_MESSAGE_CHARS.
 */
export function fitTexts(texts: string[], budget: number): string[] {
  const lengths = texts.map((t) => t.length);
  const cap = Math.max(lengthCap(lengths, budget), MIN_MESSAGE_CHARS);
  return texts.map((t) => cutText(t, cap));
}

/**
 * The largest length L such that the lengths, each cut to L, total at most `budget`
 * (Infinity when they fit whole).
 */
export function lengthCap(lengths: number[], budget: number): number {
  const sorted = [...lengths].sort((a, b) => a - b);
  let left = budget;
  for (let i = 0; i < sorted.length; i++) {
    const share = Math.floor(left / (sorted.length - i));
    if (sorted[i] > share) return share;
    left -= sorted[i];
  }
  return Number.POSITIVE_INFINITY;
}

/**
 * How many of the first texts (at least one) fit `budget` with none cut below MIN_MESSAGE_CHARS:
 * what one compaction folds, the rest left for the next.
 */
export function fittingPrefix(lengths: number[], budget: number): number {
  let lo = Math.min(1, lengths.length);
  let hi = lengths.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (lengthCap(lengths.slice(0, mid), budget) >= MIN_MESSAGE_CHARS) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** `text` at most about `max` characters: its head and how many characters were left out. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = headOf(text, max);
  return `${head} [... ${text.length - head.length} more characters]`;
}

/**
 * Runs a model call whose prompt holds a transcript of at most `budget` characters, first at
 * TRANSCRIPT_BUDGET_CHARS; refused for its length (a smaller model's window: isLengthRefusal),
 * again at half the budget, down to an eighth, before the refusal is thrown. A model with a short
 * window costs a few refused calls instead of a failure that no retry could ever change.
 */
export async function withTranscriptBudget<T>(call: (budget: number) => Promise<T>): Promise<T> {
  for (let budget = TRANSCRIPT_BUDGET_CHARS; ; budget /= 2) {
    try {
      return await call(budget);
    } catch (err) {
      if (!isLengthRefusal(err) || budget <= TRANSCRIPT_BUDGET_CHARS / 8) throw err;
    }
  }
}

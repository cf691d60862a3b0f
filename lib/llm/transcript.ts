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

/** One line per message; the marker sits where messages were left out. */
export function renderTranscript(messages: TranscriptMessage[], maxMessages: number): string {
  const t = truncateTranscript(messages, maxMessages);
  const lines = t.messages.map((m) => `[${m.seq}] ${m.role}: ${m.content.replace(/\s+/g, " ").trim()}`);
  if (t.omitted > 0) lines.splice(t.headCount, 0, `[... ${t.omitted} messages omitted ...]`);
  return lines.join("\n");
}

import { MemoryNetworkError, MemoryTimeoutError } from "./errors.js";
import type { components } from "./schema.js";

/** The events of a streamed chat reply (`Accept: text/event-stream`). */
export type ChatEvent =
  | { event: "start"; data: { threadId: string; userMessageId: string; factCount: number } }
  | { event: "delta"; data: { content: string } }
  | { event: "done"; data: components["schemas"]["ChatReply"] }
  | { event: "error"; data: { error: string } };

/**
 * Server-sent events as they arrive, parsed (`event:` and `data:` lines, a blank line ends one).
 * Aborting `signal` cancels the stream: the service then stores no reply. A stream that sends
 * nothing for `idleMs` (0: no limit) is cancelled too, with a `MemoryTimeoutError`; one that
 * breaks, or ends before its `done` or `error` event, throws a `MemoryNetworkError` (`label` names
 * the request in its message).
 */
export async function* readChatEvents(
  stream: ReadableStream<Uint8Array>,
  signal?: AbortSignal,
  idleMs = 0,
  label = "chat stream",
): AsyncGenerator<ChatEvent> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  const cancel = () => {
    reader.cancel(signal?.reason).catch(() => {});
  };
  signal?.addEventListener("abort", cancel, { once: true });
  let buffer = "";
  let ended = false;
  let finished = false; // a `done` or `error` event came
  try {
    for (;;) {
      signal?.throwIfAborted();
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await (idleMs > 0 ? readWithin(reader, idleMs) : reader.read());
      } catch (err) {
        signal?.throwIfAborted();
        if (err instanceof MemoryTimeoutError) throw err;
        // undici says "terminated" and puts the reason (a reset, the other side closing) in its cause.
        const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : "";
        const reason = err instanceof Error ? `${err.message}${cause}` : String(err);
        throw new MemoryNetworkError(`${label}: the stream broke: ${reason}`, { cause: err });
      }
      const { value, done } = chunk;
      signal?.throwIfAborted();
      if (done) {
        ended = true;
        if (!finished) throw new MemoryNetworkError(`${label}: the stream ended before its done event`);
        return;
      }
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const event = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        // Events already read but not yet given out are dropped once the caller aborted.
        signal?.throwIfAborted();
        if (event?.event === "done" || event?.event === "error") finished = true;
        if (event) yield event;
      }
    }
  } finally {
    signal?.removeEventListener("abort", cancel);
    // Left early (a `break`, a throw in the loop's body, an abort): close the response, so the
    // service stops the reply and stores none, instead of generating it for nobody.
    if (!ended) await reader.cancel(signal?.reason).catch(() => {});
    reader.releaseLock();
  }
}

/** The next chunk, or a `MemoryTimeoutError` when none comes within `ms` (the caller cancels the stream). */
function readWithin(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  ms: number,
): Promise<ReadableStreamReadResult<Uint8Array>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new MemoryTimeoutError(ms, `The chat stream stalled: no data within ${ms} ms`)),
      ms,
    );
  });
  return Promise.race([reader.read(), stalled]).finally(() => clearTimeout(timer));
}

/** One event block, or undefined for a comment or keep-alive. */
export function parseEvent(block: string): ChatEvent | undefined {
  let event = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (data.length === 0) return undefined;
  return { event, data: JSON.parse(data.join("\n")) } as ChatEvent;
}

import type { LanguageModelV4 } from "@ai-sdk/provider";
import type { MemoryClient } from "@memory-service/client";
import { withMemory } from "@memory-service/client/ai-sdk";
import { type ModelMessage, streamText } from "ai";

export interface ChatOptions {
  memory: MemoryClient;
  model: LanguageModelV4;
  /** Whose memory this is: one dataset per user. */
  dataset: string;
  system?: string;
  /** Where the memory middleware reports a failed recall or append (the chat goes on). */
  onMemoryError?: (error: unknown, stage: "recall" | "append") => void;
}

/**
 * A conversation with memory: each message is answered by the model wrapped with the memory
 * middleware (what the service knows about the user is recalled into the prompt, and the turn is
 * written to the current thread); `end()` closes the thread, so its facts are extracted and
 * recalled in the next one.
 *
 * The chat never depends on the service being up: the thread is created when it is first needed
 * (at start, or with the next turn if the service did not answer then), a failed recall or write
 * is reported and the model answers without memory.
 */
export async function startChat(options: ChatOptions) {
  const { memory, dataset } = options;
  let thread: string | undefined;
  let creating: Promise<string> | undefined;
  /** The current thread, created on first need (rejects while the service cannot create one). */
  const currentThread = (): Promise<string> => {
    if (thread) return Promise.resolve(thread);
    creating ??= memory.threads
      .create({ dataset })
      .then((created) => {
        thread = created.threadId;
        return thread;
      })
      .finally(() => {
        creating = undefined;
      });
    return creating;
  };
  /** Appends the middleware is still writing (it never waits for them itself). */
  const writing = new Set<Promise<unknown>>();
  let history: ModelMessage[] = [];
  const model = withMemory(options.model, {
    client: memory,
    dataset,
    threadId: currentThread,
    onMemoryError: options.onMemoryError,
    waitUntil: (work) => {
      writing.add(work);
      void work.finally(() => writing.delete(work));
    },
  });
  /** Waits up to `ms` for the appends in flight; resolves with how many are still unsaved. */
  const flush = async (ms: number): Promise<number> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...writing]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
    clearTimeout(timer);
    return writing.size;
  };

  let startError: unknown;
  await currentThread().catch((err) => {
    startError = err;
  });

  return {
    /** The current thread; undefined until the service has created one. */
    get threadId() {
      return thread;
    },
    /** Why no thread could be created at start (the chat runs without memory until one is). */
    startError,
    /**
     * The reply, streamed: `onDelta` gets each piece as it arrives. Aborting `signal` stops it:
     * the partial reply is returned (and written to the thread marked `stopReason: "aborted"`).
     */
    async send(text: string, onDelta: (delta: string) => void = () => {}, signal?: AbortSignal): Promise<string> {
      history.push({ role: "user", content: text });
      let failure: { error: unknown } | undefined;
      const result = streamText({
        model,
        system: options.system ?? "You are a friendly assistant. Use what you know about the user when it helps.",
        messages: history,
        abortSignal: signal,
        // The model's failure is thrown below (by default the AI SDK logs it and ends the stream).
        onError: ({ error }) => {
          failure = { error };
        },
      });
      let reply = "";
      try {
        for await (const delta of result.textStream) {
          reply += delta;
          onDelta(delta);
        }
      } catch (err) {
        failure ??= { error: err };
      }
      if (failure && !signal?.aborted) {
        history.pop();
        throw failure.error;
      }
      history.push({ role: "assistant", content: reply });
      return reply;
    },
    /**
     * Ends the thread (its episode and facts are extracted in the background) and starts a new
     * one: undefined when there was none (the service was unreachable). The turns still being
     * written are waited for (a few seconds) so that they land in the thread they belong to.
     * Throws when the service does not end it (the thread stays current).
     */
    async end(): Promise<string | undefined> {
      await flush(5_000); // (a turn's write may also be creating the thread)
      const ended = thread;
      if (ended) await memory.threads.end(ended);
      thread = undefined;
      history = [];
      // The next thread now if the service answers, else with the next turn.
      await currentThread().catch(() => {});
      return ended;
    },
    /** What the service has learnt about the user so far. */
    async facts() {
      const { facts } = await memory.facts.list(dataset);
      return facts;
    },
    /** Waits up to `ms` for the turns still being written; resolves with how many are not saved. */
    close: (ms: number) => flush(ms),
  };
}

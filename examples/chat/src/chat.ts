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
 */
export async function startChat(options: ChatOptions) {
  let thread = await options.memory.threads.create({ dataset: options.dataset });
  let history: ModelMessage[] = [];
  const model = withMemory(options.model, {
    client: options.memory,
    dataset: options.dataset,
    threadId: () => thread.threadId,
    onMemoryError: options.onMemoryError,
  });

  return {
    get threadId() {
      return thread.threadId;
    },
    /** The reply, streamed: `onDelta` gets each piece as it arrives. */
    async send(text: string, onDelta: (delta: string) => void = () => {}): Promise<string> {
      history.push({ role: "user", content: text });
      const result = streamText({
        model,
        system: options.system ?? "You are a friendly assistant. Use what you know about the user when it helps.",
        messages: history,
      });
      let reply = "";
      for await (const delta of result.textStream) {
        reply += delta;
        onDelta(delta);
      }
      history.push({ role: "assistant", content: reply });
      return reply;
    },
    /** Ends the thread (its episode and facts are extracted in the background) and starts a new one. */
    async end() {
      const ended = thread.threadId;
      await options.memory.threads.end(ended);
      thread = await options.memory.threads.create({ dataset: options.dataset });
      history = [];
      return ended;
    },
    /** What the service has learnt about the user so far. */
    async facts() {
      const { facts } = await options.memory.facts.list(options.dataset);
      return facts;
    },
  };
}

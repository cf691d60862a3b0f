import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Middleware,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
  LanguageModelV4Usage,
  SharedV4Warning,
} from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import type { BatchMessage, MemoryClient, RecallInput, RecallResult } from "./client.js";

export interface MemoryMiddlewareOptions {
  client: MemoryClient;
  /** The dataset recalled from (the user, tenant or app whose memory this is). */
  dataset: string;
  /**
   * The thread each turn (the user's message and the model's reply) is appended to; a function is
   * called once per model call, when it starts (alongside recall), so a turn appended later (a
   * failed stream held for a retry) still goes to its own thread. Without one, the middleware only
   * recalls.
   */
  threadId?: string | (() => string | undefined | Promise<string | undefined>);
  /**
   * Recall settings besides the query (limit, minConfidence, include, messageLimit), passed to
   * `client.recall` as they are. Without `include` the block holds the facts and the dataset's
   * best-matching messages (`["messages"]`, so a turn of another thread is recalled as soon as it
   * is stored); a given `include` replaces that (`[]`: facts only, as the spec's recall).
   */
  recall?: Omit<RecallInput, "dataset" | "query">;
  /** How long recall may take before the model is called without memory (default 2000 ms; never retried). */
  recallTimeoutMs?: number;
  /** The system message the recalled block becomes (default: the block as the service renders it). */
  formatContext?: (recalled: RecallResult) => string;
  /**
   * Called when recall or the append fails; the model call goes on without memory. Default: a
   * `console.warn`. The failure is also in the call's `warnings`, as an `other` warning.
   */
  onMemoryError?: (error: unknown, stage: "recall" | "append") => void;
  /**
   * Keeps the append alive after the response is sent (a Worker's `ctx.waitUntil`). The append is
   * never awaited on the response path.
   */
  waitUntil?: (work: Promise<unknown>) => void;
}

/**
 * What transformParams learnt about a call, for wrapGenerate/wrapStream (keyed by the params
 * object). `userText` undefined: a later step of the same turn (the prompt ends with tool
 * results), whose reply is appended alone.
 */
interface Turn {
  /** The thread it is appended to (none: the middleware only recalls). */
  threadId: string | undefined;
  userText?: string;
  startedAt: number;
  warning?: SharedV4Warning;
  /** The call's prompt as a retry of it repeats it (attemptKey). */
  attempt: string;
  /**
   * The failed attempt this call retries (taken over from heldAttempts): dropped once this call
   * has its own outcome to append, appended as it failed if this call never reaches the model.
   */
  retryOf?: HeldTurn;
}

/** A failed attempt's turn as it would be appended. */
interface HeldTurn {
  turn: Turn;
  reply: Reply;
}

/**
 * How long a stream that failed and was then cancelled waits for the SDK to try the same call
 * again (`streamText`'s `streamRetries`, or `onError` asking for a retry) before its partial turn
 * is appended. The SDK cancels the failed attempt and calls the model again at once.
 */
export const STREAM_RETRY_GRACE_MS = 5_000;

/** A call as its retry repeats it: its thread, the prompt's length, whose step it is and the turn's question. */
const attemptKey = (threadId: string | undefined, prompt: LanguageModelV4Prompt, toolStep: boolean, userText: string) =>
  `${threadId ?? ""}\u0000${prompt.length}\u0000${toolStep ? "tool" : "user"}\u0000${userText}`;

/**
 * How long an attempt appended as failed (its grace over) is remembered: the SDK waits up to a
 * minute before a retry (a 429's `retry-after`, or its own backoff at `maxRetries` 3 and more), and
 * such a late retry appends its reply alone, the user message being in the thread already.
 */
export const LATE_RETRY_MS = 65_000;

/**
 * Failed attempts held for STREAM_RETRY_GRACE_MS by their attemptKey: a retry of the same call
 * takes the turn over (its user message is appended once, with the retry's outcome); else the
 * held turn is appended as it failed, and a retry after that (`lateRetry`) appends its reply alone.
 * Before, the failed attempt appended the user message and its partial reply, and the retry
 * appended the user message again with its own. Another turn of the same thread first appends
 * what that thread holds (`flush`), so a thread keeps the order its turns were asked in; other
 * threads' held attempts keep waiting for their retries.
 */
function heldAttempts(appendLater: (turn: Turn, reply: Reply) => void, waitUntil?: (work: Promise<unknown>) => void) {
  const held = new Map<string, HeldTurn & { release: () => void }>();
  /** Attempts appended as failed once their grace ran out, until when a retry of them is late. */
  const appendedAsFailed = new Map<string, number>();
  const forgetOld = () => {
    const now = Date.now();
    for (const [attempt, until] of appendedAsFailed) if (until <= now) appendedAsFailed.delete(attempt);
  };
  /** Removes the held attempt `attempt`, its timer stopped; returns it. */
  const take = (attempt: string): HeldTurn | undefined => {
    const entry = held.get(attempt);
    if (!entry) return undefined;
    held.delete(attempt);
    entry.release();
    return { turn: entry.turn, reply: entry.reply };
  };
  return {
    hold(turn: Turn, reply: Reply) {
      const previous = take(turn.attempt);
      if (previous) appendLater(previous.turn, previous.reply);
      let release = () => {};
      const released = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          const entry = take(turn.attempt);
          if (!entry) return;
          forgetOld();
          appendedAsFailed.set(turn.attempt, Date.now() + LATE_RETRY_MS);
          appendLater(entry.turn, entry.reply);
        }, STREAM_RETRY_GRACE_MS);
        release = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      held.set(turn.attempt, { turn, reply, release });
      waitUntil?.(released);
    },
    /** A new call: the held attempt it retries, if any, now waits on that call's outcome. */
    takeOver: take,
    /** Whether `attempt` was appended as failed (its user message too) within LATE_RETRY_MS. */
    lateRetry(attempt: string): boolean {
      forgetOld();
      return appendedAsFailed.has(attempt);
    },
    /** Appends every attempt `threadId` holds now, in the order they failed. */
    flush(threadId: string | undefined) {
      for (const [attempt, entry] of [...held]) {
        if (entry.turn.threadId !== threadId) continue;
        const taken = take(attempt);
        if (taken) appendLater(taken.turn, taken.reply);
      }
    },
  };
}

/**
 * Memory for any AI SDK model: before each call whose last message is the user's, recalls for that
 * message and adds the block as a system message (one round trip to the service before the model
 * call); after it, appends the user message and the reply to the thread in one batch request that
 * nothing on the response path waits for. With streamText the reply is appended when the stream
 * ends. If the stream is aborted or fails part-way, the user message and the partial reply are
 * appended (the reply with `metadata.stopReason: "aborted"` or `"error"`), or the user message
 * alone when no text had arrived; a failed stream the SDK tries again (`streamRetries`) appends
 * nothing of the failed attempt, and the retry appends the turn once; a call aborted before the
 * model was called (during recall) writes nothing. A call with tools runs in steps: each step
 * recalls for the turn's question (the SDK gives every step a fresh prompt); the first appends the
 * user message (and any text before the tool call), each later step (its prompt ends with the tool
 * results) its reply alone, in order. A recall failure or timeout never fails the call: it
 * proceeds without memory and reports the failure.
 */
export function memoryMiddleware(options: MemoryMiddlewareOptions): LanguageModelV4Middleware {
  const turns = new WeakMap<LanguageModelV4CallOptions, Turn>();
  const report = (error: unknown, stage: "recall" | "append") => {
    const warn = (err: unknown) => console.warn(`memory ${stage} failed:`, err instanceof Error ? err.message : err);
    if (!options.onMemoryError) return warn(error);
    try {
      options.onMemoryError(error, stage);
    } catch (thrown) {
      // The app's own handler failing must not fail its model call either.
      warn(thrown);
    }
  };

  const appendTurn = appender(options, report);
  const threadOf = (): Promise<string | undefined> =>
    Promise.resolve()
      .then(() => (typeof options.threadId === "function" ? options.threadId() : options.threadId))
      .catch((err) => {
        report(err, "append");
        return undefined;
      });
  const attempts = heldAttempts(appendTurn, options.waitUntil);
  // A turn's outcome: what earlier turns of its thread left held goes first (a retry took its own
  // over already).
  const appendLater = (turn: Turn, reply: Reply) => {
    attempts.flush(turn.threadId);
    appendTurn(turn, reply);
  };
  // A model call that failed before any outcome of its own (it rejected, or was aborted while the
  // provider had not answered yet): held for the SDK's retry of it like a failed stream; what it
  // retried is dropped for it. An abort is not retried: the turn it retried as that failed, else
  // the user message alone (the model was asked).
  const modelCallFailed = (turn: Turn | undefined, aborted: boolean) => {
    if (!turn) return;
    const reply = { text: "", modelId: "", stopReason: aborted ? "aborted" : "error" };
    // A retry that failed so keeps the turn it retried (its partial reply), under the same key.
    const failed = turn.retryOf ?? { turn, reply };
    if (aborted) appendLater(failed.turn, failed.reply);
    else attempts.hold(failed.turn, failed.reply);
  };

  return {
    specificationVersion: "v4",

    async transformParams({ params }) {
      // A tool step (generateText/streamText with tools) ends with the tool results: the SDK builds
      // its prompt afresh, so the block is recalled again for the turn's question (the service
      // answers a repeated query without a provider call), and its reply is appended alone.
      const toolStep = params.prompt.at(-1)?.role === "tool";
      const userText = toolStep ? lastUserText(params.prompt) : latestUserText(params.prompt);
      if (userText === undefined) return params;
      const startedAt = Date.now();
      // Resolved beside recall, in call order (a function may create the thread).
      const thread = threadOf();
      let transformed = params;
      let warning: SharedV4Warning | undefined;
      let recallAborted: unknown;
      try {
        const recalled = await options.client.recall(
          { ...options.recall, dataset: options.dataset, query: [...userText].slice(0, 2000).join("") },
          { timeoutMs: options.recallTimeoutMs ?? 2000, retries: 0, signal: params.abortSignal },
        );
        const block = options.formatContext ? options.formatContext(recalled) : recalled.context;
        if (block) transformed = { ...params, prompt: withSystemMessage(params.prompt, block) };
      } catch (err) {
        if (!params.abortSignal?.aborted) {
          report(err, "recall");
          warning = { type: "other", message: `memory recall failed, answered without memory: ${messageOf(err)}` };
        } else recallAborted = err;
      }
      const threadId = await thread;
      const attempt = attemptKey(threadId, params.prompt, toolStep, userText);
      // A retry of a failed attempt: the turn held for it waits on this call's outcome; a retry
      // after its grace finds the user message appended, and appends its reply alone.
      const retryOf = attempts.takeOver(attempt);
      const late = retryOf ? retryOf.turn.userText === undefined : attempts.lateRetry(attempt);
      const turn: Turn = {
        threadId,
        userText: toolStep || late ? undefined : userText,
        startedAt,
        attempt,
        warning,
        retryOf,
      };
      if (recallAborted !== undefined) {
        // Aborted before the model was called: the turn it retried as that failed, else nothing.
        if (turn.retryOf) appendLater(turn.retryOf.turn, turn.retryOf.reply);
        throw recallAborted;
      }
      turns.set(transformed, turn);
      return transformed;
    },

    async wrapGenerate({ doGenerate, params, model }) {
      const turn = turns.get(params);
      let result: Awaited<ReturnType<typeof doGenerate>>;
      try {
        result = await doGenerate();
      } catch (err) {
        modelCallFailed(turn, params.abortSignal?.aborted === true);
        throw err;
      }
      if (!turn) return result;
      const text = result.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("");
      appendLater(turn, { text, modelId: model.modelId, usage: result.usage, stopReason: result.finishReason.unified });
      return turn.warning ? { ...result, warnings: [...result.warnings, turn.warning] } : result;
    },

    async wrapStream({ doStream, params, model }) {
      const turn = turns.get(params);
      let result: Awaited<ReturnType<typeof doStream>>;
      try {
        result = await doStream();
      } catch (err) {
        modelCallFailed(turn, params.abortSignal?.aborted === true);
        throw err;
      }
      if (!turn) return result;
      return { ...result, stream: observe(result.stream, turn, model, params.abortSignal, appendLater, attempts.hold) };
    },
  };
}

/** `wrapLanguageModel` with the memory middleware: `withMemory(model, { client, dataset, threadId })`. */
export function withMemory(model: LanguageModelV4, options: MemoryMiddlewareOptions): LanguageModelV4 {
  return wrapLanguageModel({ model, middleware: memoryMiddleware(options) });
}

/**
 * Appends a turn to its thread in one batch request, in the background (never awaited by the
 * caller). A thread's appends run one after another, in the order they were asked for, so a tool
 * step's reply never lands before its turn's user message.
 */
function appender(options: MemoryMiddlewareOptions, report: (error: unknown, stage: "append") => void) {
  const pending = new Map<string, Promise<unknown>>();
  const append = async (turn: Turn, reply: Reply) => {
    const { threadId } = turn;
    if (!threadId) return;
    const messages = turnMessages(turn, reply);
    if (messages.length === 0) return;
    const previous = pending.get(threadId) ?? Promise.resolve();
    const write = previous.catch(() => {}).then(() => options.client.threads.addMessages(threadId, messages));
    pending.set(threadId, write);
    try {
      await write;
    } finally {
      if (pending.get(threadId) === write) pending.delete(threadId);
    }
  };
  return (turn: Turn, reply: Reply) => {
    const work = append(turn, reply).catch((err) => report(err, "append"));
    options.waitUntil?.(work);
  };
}

/** The messages a call adds to the thread: its user message (a turn's first step), then its reply if any. */
function turnMessages(turn: Turn, reply: Reply): BatchMessage[] {
  const messages: BatchMessage[] = turn.userText === undefined ? [] : [{ role: "user", content: turn.userText }];
  if (reply.text) {
    messages.push({
      role: "assistant",
      content: reply.text,
      model: reply.modelId,
      latencyMs: Date.now() - turn.startedAt,
      tokens: tokensOf(reply.usage),
      metadata: reply.stopReason ? { stopReason: reply.stopReason } : undefined,
    });
  }
  return messages;
}

interface Reply {
  text: string;
  modelId: string;
  usage?: LanguageModelV4Usage;
  stopReason?: string;
}

/**
 * The model's stream, passed through part by part while its text is collected; when it ends
 * (finished, cancelled by the consumer, aborted or failed) the turn is appended, once. A stream
 * that failed (an error part), which the SDK may try again, is held for that retry instead
 * (`hold`, heldAttempts), unless it was aborted.
 */
function observe(
  source: ReadableStream<LanguageModelV4StreamPart>,
  turn: Turn,
  model: LanguageModelV4,
  abortSignal: AbortSignal | undefined,
  appendLater: (turn: Turn, reply: Reply) => void,
  hold: (turn: Turn, reply: Reply) => void,
): ReadableStream<LanguageModelV4StreamPart> {
  const reader = source.getReader();
  let text = "";
  let usage: LanguageModelV4Usage | undefined;
  let finishReason: string | undefined;
  let failed = false;
  let ended = false;
  const end = (stopReason: string | undefined, then = appendLater) => {
    if (ended) return;
    ended = true;
    abortSignal?.removeEventListener("abort", onAbort);
    then(turn, { text, modelId: model.modelId, usage, stopReason });
  };
  const onAbort = () => end("aborted");
  abortSignal?.addEventListener("abort", onAbort, { once: true });
  return new ReadableStream<LanguageModelV4StreamPart>({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) {
          // A failed attempt may be retried: its source has ended before the SDK cancels it.
          if (failed) end("error", hold);
          else end(finishReason);
          controller.close();
          return;
        }
        if (value.type === "text-delta") text += value.delta;
        else if (value.type === "finish") {
          usage = value.usage;
          finishReason = value.finishReason.unified;
        } else if (value.type === "error") failed = true;
        else if (value.type === "stream-start" && turn.warning) {
          controller.enqueue({ ...value, warnings: [...value.warnings, turn.warning] });
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        end(abortSignal?.aborted ? "aborted" : "error");
        controller.error(err);
      }
    },
    cancel(reason) {
      if (failed && !abortSignal?.aborted) end("error", hold);
      else end("aborted");
      return reader.cancel(reason);
    },
  });
}

/** The text of the prompt's last message when it is the user's (a new turn); undefined otherwise (a tool step). */
export function latestUserText(prompt: LanguageModelV4Prompt): string | undefined {
  const last = prompt.at(-1);
  if (last?.role !== "user") return undefined;
  const text = last.content
    .flatMap((part) => (part.type === "text" ? [part.text] : []))
    .join("\n")
    .trim();
  return text || undefined;
}

/** The text of the prompt's last user message, wherever it is (a tool step's turn question). */
function lastUserText(prompt: LanguageModelV4Prompt): string | undefined {
  for (let i = prompt.length - 1; i >= 0; i--) {
    if (prompt[i].role === "user") return latestUserText(prompt.slice(0, i + 1));
  }
  return undefined;
}

/** The block as a system message after the prompt's own system messages (some providers want those first). */
export function withSystemMessage(prompt: LanguageModelV4Prompt, content: string): LanguageModelV4Prompt {
  const at = prompt.findIndex((m) => m.role !== "system");
  const index = at < 0 ? prompt.length : at;
  return [...prompt.slice(0, index), { role: "system", content }, ...prompt.slice(index)];
}

function tokensOf(usage: LanguageModelV4Usage | undefined): BatchMessage["tokens"] {
  if (!usage) return undefined;
  const input = usage.inputTokens.total;
  const output = usage.outputTokens.total;
  return {
    input,
    output,
    total: input !== undefined && output !== undefined ? input + output : undefined,
  };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

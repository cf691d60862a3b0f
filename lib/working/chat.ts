import { providerConfigured } from "../config";
import type { ProjectContext } from "../context";
import { NoProviderError } from "../errors";
import type { Claim } from "../idempotency";
import type { ChatMessage, Completion } from "../llm/client";
import { CHAT_SYSTEM_PROMPT } from "../llm/prompts";
import { fitTexts, withTranscriptBudget } from "../llm/transcript";
import { errorFields } from "../log";
import { recall } from "../recall/recall";
import type { MessageRole } from "../roles";
import { getThread } from "../threads";
import type { UsageOwner } from "../usage/backlog";
import { budgetExhausted } from "../usage/budget";
import { type UsageCollector, usageCollector } from "../usage/collector";
import { carryingUsage, deferUsage } from "../usage/sql";
import { addMessage, prepareContext } from "./messages";

export interface ChatInput {
  threadId: string;
  /** The user's message. */
  content: string;
  /** Window size, as prepare's messageLimit. */
  messageLimit: number;
  /** Extra system instructions for this reply only. */
  instructions?: string;
  /** Put the dataset's recalled facts in the system prompt. */
  recall: boolean;
  /**
   * Called once the user's message is stored: whatever fails after it, the turn has written, so
   * a retry must not run it again (the route keeps even its 5xx under an Idempotency-Key).
   */
  onStored?: () => void;
  /**
   * The request's claim on its Idempotency-Key: the user message's statement records on it that
   * the message is stored, so a retry taking the claim over after a crash answers the turn's 500.
   */
  claim?: Claim;
}

export interface ChatResult {
  threadId: string;
  reply: {
    messageId: string;
    sequenceNumber: number;
    content: string;
    model: string;
    tokens: Completion["tokens"];
    latencyMs: number;
    createdAt: string;
  };
  userMessage: { messageId: string; sequenceNumber: number; createdAt: string };
  factCount: number;
  compacted: boolean;
}

/** A reply being streamed: `start`, then the deltas, then `finish()` stores it. */
export interface ChatStream {
  start: { threadId: string; userMessageId: string; factCount: number };
  /** Text deltas; a provider failing midway throws a ProviderError out of the iteration. */
  deltas: AsyncIterable<string>;
  /** After the deltas ran out: stores the reply and answers like `chat`. Throws if the reply is incomplete. */
  finish(): Promise<ChatResult>;
  /** The client went away: stop reading the provider (the iteration ends quietly). */
  abort(): void;
}

/** Recall's own query limit: a longer message is cut for retrieval only (it is stored and sent whole). */
export const RECALL_QUERY_CHARS = 2000;

/**
 * One chat turn: the user's message is stored, the window and the dataset's facts are read, one
 * model call answers and the reply is stored with its model, usage and latency. A provider failure
 * throws (a 500 for the route) and leaves the user's message stored, so a retry has it in context.
 * No provider configured at all is a 500 once the thread is known to be the caller's (a 404
 * otherwise, as always), and nothing is stored.
 */
export async function chat(ctx: ProjectContext, input: ChatInput): Promise<ChatResult> {
  await requireProvider(ctx, input.threadId);
  const turn = await beginTurn(ctx, input);
  const started = performance.now();
  let completion: Completion;
  try {
    completion = await withTranscriptBudget((budget) =>
      ctx.deps.llm.complete({
        system: turn.system,
        messages: windowWithin(turn.messages, budget),
        meter: turn.usage.meter("chat"),
      }),
    );
  } catch (err) {
    // No reply to store it with: the failed call is carried by a later statement.
    deferUsage(ctx.deps, turn.usage, turn.scope);
    throw err;
  }
  return storeReply(ctx, input.threadId, turn, completion, performance.now() - started);
}

/**
 * The same turn, streamed. Resolves once the provider accepted the request, so every failure up to
 * then (a 404, the provider refusing) is still an ordinary error response.
 */
export async function startChatStream(ctx: ProjectContext, input: ChatInput): Promise<ChatStream> {
  const { threadId } = input;
  await requireProvider(ctx, threadId);
  const turn = await beginTurn(ctx, input);
  const started = performance.now();
  let stream: Awaited<ReturnType<typeof ctx.deps.llm.stream>>;
  try {
    stream = await withTranscriptBudget((budget) =>
      ctx.deps.llm.stream({
        system: turn.system,
        messages: windowWithin(turn.messages, budget),
        meter: turn.usage.meter("chat"),
      }),
    );
  } catch (err) {
    deferUsage(ctx.deps, turn.usage, turn.scope);
    throw err;
  }
  let ended: number | undefined;
  return {
    start: { threadId, userMessageId: turn.user.messageId, factCount: turn.factCount },
    deltas: (async function* deltas() {
      try {
        yield* stream;
        ended = performance.now();
      } finally {
        // A reply that will not be stored (the stream broke, the client left): a later statement
        // carries its call.
        if (!isWhole(stream)) deferUsage(ctx.deps, turn.usage, turn.scope);
      }
    })(),
    // completion() throws unless the stream ran to a whole reply: a partial one is never stored.
    finish: async () => {
      const completion = stream.completion();
      return storeReply(ctx, threadId, turn, completion, (ended ?? performance.now()) - started);
    },
    abort: () => {
      stream.abort();
      // Nothing will be stored: a call already ended (a whole reply the client left) is carried too.
      deferUsage(ctx.deps, turn.usage, turn.scope);
    },
  };
}

/**
 * Without a provider no reply can ever be made: the NoProviderError every route needing a model
 * answers (its 500, functions/errors.ts), checked before the message is stored, not after. The thread is
 * read first (one statement, only on this path), so another project's thread is still a 404.
 */
async function requireProvider(ctx: ProjectContext, threadId: string) {
  if (providerConfigured(ctx.deps.config)) return;
  await getThread(ctx, { threadId });
  throw new NoProviderError();
}

/** Whether the stream ran to a whole reply (one `finish()` stores). */
function isWhole(stream: { completion(): Completion }): boolean {
  try {
    stream.completion();
    return true;
  } catch {
    return false;
  }
}

interface Turn {
  user: Awaited<ReturnType<typeof addMessage>>;
  factCount: number;
  system: string;
  messages: ChatMessage[];
  /** The turn's provider call, recorded by the statement that stores the reply. */
  usage: UsageCollector;
  scope: UsageOwner;
}

/**
 * Store the user's message (the thread check: a 404 stores nothing), then read the window, which
 * now ends with it, and recall the dataset's facts with it as the query. Recall needs the thread's
 * dataset, which only the window's statement reads, so the two run one after the other: the
 * alternative, a second read of the thread alongside the insert, would cost a statement to save
 * one short round trip before a model call of seconds. The window's statement also says whether
 * the project's monthly token budget is spent: then a 429, with the user's message stored.
 */
async function beginTurn(ctx: ProjectContext, input: ChatInput): Promise<Turn> {
  const { threadId } = input;
  const user = await addMessage(ctx, { threadId, role: "user", content: input.content, claim: input.claim });
  input.onStored?.();
  const window = await prepareContext(ctx, { threadId, messageLimit: input.messageLimit, budget: true });
  if (window.budgetSpent) throw budgetExhausted();
  const facts = input.recall ? await recallFacts(ctx, window.dataset, input.content) : { context: "", factCount: 0 };
  return {
    user,
    factCount: facts.factCount,
    system: [CHAT_SYSTEM_PROMPT, input.instructions?.trim(), facts.context].filter(Boolean).join("\n\n"),
    messages: window.messages.map(toChatMessage),
    usage: usageCollector(),
    scope: { projectId: ctx.projectId, dataset: window.dataset },
  };
}

/**
 * The window's messages, their texts together within `budget` characters (fitTexts): a long one
 * (a pasted log) cut to its head. Sent whole, it was refused by the model on every turn until
 * it left the window.
 */
function windowWithin(messages: ChatMessage[], budget: number): ChatMessage[] {
  const texts = fitTexts(
    messages.map((m) => m.content),
    budget,
  );
  return messages.map((m, i) => ({ ...m, content: texts[i] }));
}

/** Recall degrades by itself; should it still throw, the reply is generated without facts. */
async function recallFacts(ctx: ProjectContext, dataset: string, content: string) {
  try {
    const { body } = await recall(ctx, { dataset, query: recallQuery(content), include: [] });
    return { context: body.context, factCount: body.factCount };
  } catch (err) {
    ctx.deps.log.warn("chat: recall failed; replying without facts", { dataset, ...errorFields(err) });
    return { context: "", factCount: 0 };
  }
}

function recallQuery(content: string): string {
  if (content.length <= RECALL_QUERY_CHARS) return content;
  const cut = content.slice(0, RECALL_QUERY_CHARS);
  // Do not leave half of a surrogate pair at the end.
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/**
 * Chat Completions accepts a `tool` message only as the answer to an assistant tool call (with
 * its tool_call_id), which the stored window does not have: a tool output is passed as user text.
 */
function toChatMessage(m: { role: MessageRole; content: string }): ChatMessage {
  return m.role === "tool" ? { role: "user", content: `[tool] ${m.content}` } : { role: m.role, content: m.content };
}

async function storeReply(
  ctx: ProjectContext,
  threadId: string,
  turn: Turn,
  completion: Completion,
  elapsedMs: number,
): Promise<ChatResult> {
  // Whole milliseconds: the column is a `real`, and the stored value must equal the one answered.
  const latencyMs = Math.round(elapsedMs);
  let reply: Awaited<ReturnType<typeof addMessage>>;
  try {
    reply = await carryingUsage(turn.usage, (carried) =>
      addMessage(ctx, {
        threadId,
        role: "assistant",
        content: completion.text,
        model: completion.model,
        tokens: completion.tokens,
        latencyMs,
        usage: carried,
        usageDataset: turn.scope.dataset ?? undefined,
      }),
    );
  } catch (err) {
    // The reply's statement failed with the call in it: a later statement carries it.
    deferUsage(ctx.deps, turn.usage, turn.scope);
    throw err;
  }
  return {
    threadId,
    reply: {
      messageId: reply.messageId,
      sequenceNumber: reply.sequenceNumber,
      content: completion.text,
      model: completion.model,
      tokens: completion.tokens,
      latencyMs,
      createdAt: reply.createdAt,
    },
    userMessage: {
      messageId: turn.user.messageId,
      sequenceNumber: turn.user.sequenceNumber,
      createdAt: turn.user.createdAt,
    },
    factCount: turn.factCount,
    compacted: turn.user.compacted || reply.compacted,
  };
}

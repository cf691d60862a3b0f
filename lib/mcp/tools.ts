import { z } from "zod";
import type { ProjectContext } from "../context";
import { listEpisodes } from "../episodic/episodes";
import { endThread } from "../episodic/triggers";
import { dateInput, text } from "../inputs";
import { integerIn, numberIn } from "../numbers";
import { RECALL_FAILURE, recall } from "../recall/recall";
import { messageRole } from "../roles";
import { invalidateFact } from "../semantic/facts";
import { DEFAULT_SETTINGS } from "../settings/settings";
import { createThread, getThread } from "../threads";
import { addMessages, MAX_BATCH_MESSAGES } from "../working/batch";
import { dataset, newDataset } from "./inputs";

/**
 * The MCP specification's hints about a tool's behaviour (its `ToolAnnotations`), written here so
 * the descriptors stay free of the SDK: functions/mcp/server.ts hands them to it as they are.
 */
export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** What a tool answers: the structured result, and the text a model reads first when it is not the JSON. */
export interface ToolOutput {
  result: Record<string, unknown>;
  text?: string;
}

export interface MemoryTool {
  name: string;
  title: string;
  description: string;
  input: z.ZodObject;
  annotations: ToolAnnotations;
  /**
   * The message of an unexpected failure: the 500 message of the matching /v1 route, when it
   * declares one (functions/mcp/server.ts falls back to the default 500 message otherwise).
   */
  failure?: string;
  /** Validates the arguments (a ZodError when they are bad) and runs the tool. */
  call(ctx: ProjectContext, args: unknown): Promise<ToolOutput>;
}

function defineTool<S extends z.ZodObject>(def: {
  name: string;
  title: string;
  description: string;
  input: S;
  annotations: ToolAnnotations;
  failure?: string;
  run(ctx: ProjectContext, input: z.output<S>): Promise<ToolOutput>;
}): MemoryTool {
  const { run, ...rest } = def;
  return {
    ...rest,
    call: async (ctx, args) => run(ctx, await def.input.parseAsync(args ?? {})),
  };
}

const messageSchema = z.object({
  role: messageRole().describe("Who said it: user, assistant, system or tool."),
  content: text().min(1).describe("The message text, non-empty."),
  model: text().max(200).optional().describe("The model that produced an assistant turn."),
});

const addMessagesTool = defineTool({
  name: "add_messages",
  title: "Add messages to memory",
  description: `Store conversation turns in a thread so the service can learn from them: threads are condensed into episodes (summaries) and facts about the user, in the background. Call it after each exchange with the user's message and your reply, in order. Without threadId a new thread is started in the dataset and its threadId returned: pass that threadId on later calls of the same conversation, and call end_thread when the conversation is over. Up to ${MAX_BATCH_MESSAGES} messages per call (and 1 MB of request); all are stored or none.`,
  input: z
    .object({
      dataset: newDataset().optional().describe("The dataset of the thread. Required when threadId is omitted."),
      threadId: text()
        .min(1)
        .optional()
        .describe("A thread returned by an earlier add_messages call. Omit it to start a new thread."),
      messages: z.array(messageSchema).min(1).max(MAX_BATCH_MESSAGES).describe("The messages, oldest first."),
    })
    .refine((v) => v.threadId !== undefined || v.dataset !== undefined, {
      path: ["dataset"],
      message: "dataset is required when threadId is omitted",
    }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run(ctx, input) {
    const thread = input.threadId
      ? await existingThread(ctx, input.threadId, input.dataset)
      : { ...(await createThread(ctx, { dataset: input.dataset as string })), created: true };
    const added = await addMessages(ctx, {
      messages: input.messages.map((m) => ({ ...m, threadId: thread.threadId })),
    });
    return {
      result: {
        threadId: thread.threadId,
        dataset: thread.dataset,
        threadCreated: thread.created,
        messages: added.messages,
        compacted: added.compactedThreadIds.length > 0,
      },
    };
  },
});

/** The named thread (404 Thread not found otherwise); a dataset given beside it must be the thread's. */
async function existingThread(ctx: ProjectContext, threadId: string, dataset: string | undefined) {
  const thread = await getThread(ctx, { threadId });
  if (dataset !== undefined && dataset !== thread.dataset) {
    throw new z.ZodError([
      {
        code: "custom",
        path: ["dataset"],
        message: `Thread ${threadId} belongs to another dataset; omit dataset or pass the thread's own`,
        input: dataset,
      },
    ]);
  }
  return { ...thread, created: false };
}

const { semantic: defaults } = DEFAULT_SETTINGS;

const recallInput = {
  dataset: dataset(),
  limit: integerIn(1, 100)
    .optional()
    .describe(`How many facts, 1-100; default the project's factsInContext (${defaults.factsInContext}).`),
  minConfidence: numberIn(0, 1)
    .optional()
    .describe(
      `Leave out facts rated below this, 0-1; default the project's retrievalMinConfidence (${defaults.retrievalMinConfidence}).`,
    ),
};

const recallTool = defineTool({
  name: "recall",
  title: "Recall memory",
  description:
    "What is known about the user of a dataset, as a prompt-ready block: facts (most relevant first), then the stored conversation messages that best match (the user's own words, recalled as soon as they are added, before any fact is learned from them), plus the facts and messages themselves with their ids and scores. Call it before answering, with the user's latest message as the query, and use the block as background knowledge. Without a query it returns the most recent facts and messages. An empty block means nothing relevant is known yet.",
  input: z.object({
    ...recallInput,
    query: text()
      .max(2000)
      .optional()
      .describe("What the answer needs, usually the user's latest message (up to 2000 characters)."),
    asOf: dateInput()
      .optional()
      .describe("Only facts true at that time (ISO datetime or YYYY-MM-DD), for questions about the past."),
    include: z
      .array(z.enum(["messages", "episodes", "synthesis"]))
      .default(["messages"])
      .describe(
        'Extra parts, default ["messages"]: `messages` (the best-matching conversation messages, also in the block), `episodes` (summaries of the most relevant past conversations), `synthesis` (a model-written paragraph over the block; slower). A given list replaces the default: [] gives facts only.',
      ),
    messageLimit: integerIn(1, 100)
      .optional()
      .describe(
        `With messages: how many, 1-100; default the project's messagesInContext (${defaults.messagesInContext}).`,
      ),
  }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  failure: RECALL_FAILURE,
  async run(ctx, input) {
    const { body } = await recall(ctx, { ...input, include: ["raw", ...input.include] });
    return { result: body, text: body.context || "Nothing is known yet that matches this query." };
  },
});

const searchFactsTool = defineTool({
  name: "search_facts",
  title: "Search facts",
  description:
    "Find the stored facts about the user that match a query, best first, each with its factId, subject, predicate, object, confidence, the user's own words (sourceQuote) and validity. Use it to check what is remembered about a topic, or to find the factId of a fact to forget.",
  input: z.object({
    ...recallInput,
    query: text().min(1).max(2000).describe("What to look for (1-2000 characters)."),
  }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  failure: RECALL_FAILURE,
  async run(ctx, input) {
    const { body } = await recall(ctx, { ...input, include: ["raw"] });
    return { result: { facts: body.facts ?? [], factCount: body.factCount } };
  },
});

const listEpisodesTool = defineTool({
  name: "list_episodes",
  title: "List episodes",
  description:
    "Summaries of past conversations (episodes) in a dataset, newest first, each with its key learnings. Use it to see what earlier conversations were about. Episodes are written in the background after a thread ends or goes idle, so a conversation just added may not be listed yet (status pending or processing).",
  input: z.object({
    dataset: dataset(),
    limit: integerIn(1, 50).default(10).describe("How many, 1-50 (default 10)."),
    before: dateInput()
      .optional()
      .describe("Only episodes that ended before this time (ISO datetime): the endedAt of the last one seen, to page."),
    beforeId: text()
      .min(1)
      .max(64)
      .optional()
      .describe(
        "With before: the episodeId of the last one seen, so that episodes ending at that same time are not skipped.",
      ),
    status: z
      .enum(["pending", "processing", "completed", "failed"])
      .default("completed")
      .describe("Which episodes (default completed)."),
  }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run(ctx, input) {
    return { result: await listEpisodes(ctx, input) };
  },
});

const forgetFactTool = defineTool({
  name: "forget_fact",
  title: "Forget a fact",
  description:
    "Stop using a fact: it leaves recall and search at once (the record is kept, marked invalidated). Use it when the user asks you to forget something or says a remembered fact is wrong; find the factId with search_facts or recall first. A fact already forgotten, or not in the dataset, is `Fact not found`.",
  input: z.object({
    dataset: dataset(),
    factId: text().min(1).describe("The fact's id (`fct_…`) from search_facts or recall."),
  }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  async run(ctx, input) {
    return { result: await invalidateFact(ctx, input) };
  },
});

const endThreadTool = defineTool({
  name: "end_thread",
  title: "End a thread",
  description:
    "Mark a conversation as finished so it is condensed into an episode and facts now, instead of after the idle timeout. Call it when the user says goodbye or the task is done. Ending it again makes another episode (of the messages added since, or of the whole thread if there are none), so call it once per conversation.",
  input: z.object({
    threadId: text().min(1).describe("The thread returned by add_messages."),
  }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  async run(ctx, input) {
    return { result: await endThread(ctx, input) };
  },
});

/** The tools, in the order a client lists them. */
export const MEMORY_TOOLS: readonly MemoryTool[] = [
  addMessagesTool,
  recallTool,
  searchFactsTool,
  listEpisodesTool,
  forgetFactTool,
  endThreadTool,
];

import { createRoute, z } from "@hono/zod-openapi";
import { bodyLimit } from "hono/body-limit";
import { HttpError } from "../../lib/errors";
import { messageRole } from "../../lib/roles";
import { addMessages, type BatchItem, MAX_BATCH_MESSAGES } from "../../lib/working/batch";
import { projectContext } from "../context";
import { createRouter } from "../router";
import { errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { dateInput, EXAMPLES, pathParams, text } from "../schemas/inputs";
import { addMessageBody } from "../schemas/messages";

/** The batch routes' body limit (the rest of the API: MAX_BODY_BYTES, 1 MB). */
export const MAX_BATCH_BODY_BYTES = 5 * 1024 * 1024;

/**
 * The paths whose body limit is MAX_BATCH_BODY_BYTES instead of 1 MB. functions/app.ts picks the
 * limit by path where the global one runs (before the idempotency middleware reads the body).
 */
export const BATCH_PATH = /^\/v1\/memory\/working\/(threads\/[^/]+\/)?messages(:|%3A)batch$/i;

export const batchBodyLimit = bodyLimit({
  maxSize: MAX_BATCH_BODY_BYTES,
  onError: () => {
    throw new HttpError(413, "Request body too large (limit 5 MB for a batch)");
  },
});

const tags = ["Working memory"];
const base = { tags, security: security.apiKey };

const LIMITS = `At most ${MAX_BATCH_MESSAGES} messages and ${MAX_BATCH_BODY_BYTES / 1024 / 1024} MB of body.`;
const RULES =
  "All or nothing, in one transaction: an invalid item is a 400 whose issues name it by index (`path: [\"messages\", i, field]`) and nothing is written. Sequence numbers are gapless and follow request order within each thread. The idle timer is armed and auto-compaction checked once per thread, not per message. `createdAt` (optional, for backfills) must not be in the future, must not decrease within a thread in the batch, and must not be before the thread's last message; it is stored as the message's createdAt and the thread's lastMessageAt follows the last one. An unknown thread, or another project's, is a 404 `Thread not found` and nothing is written.";

const createdAtSchema = dateInput.optional().openapi({
  type: "string",
  format: "date-time",
  description:
    "Historical time (backfill): not in the future, non-decreasing per thread, not before the thread's last message. Default: now.",
});

const batchResponse = jsonResponse(
  z.object({
    messages: z
      .array(
        z.object({
          messageId: z.string(),
          threadId: z.string(),
          sequenceNumber: z.number().int(),
          role: messageRole(),
          createdAt: z.string(),
        }),
      )
      .openapi({ description: "The created messages, in request order." }),
    compactedThreadIds: z
      .array(z.string())
      .openapi({ description: "Threads this batch brought to autoCompactThreshold and compacted inline." }),
  }),
  "Stored, all of them",
);

const oneThreadItem = addMessageBody.extend({ createdAt: createdAtSchema });
const crossThreadItem = addMessageBody.extend({ threadId: text().min(1), createdAt: createdAtSchema });
const messagesOf = <T extends z.ZodType>(schema: T) =>
  z
    .array(schema)
    .min(1)
    .max(MAX_BATCH_MESSAGES)
    .openapi({ description: `In order. ${LIMITS}` });

const responses = {
  201: batchResponse,
  400: errorResponses[400],
  401: errorResponses[401],
  404: errorResponses[404],
  413: jsonResponse(z.object({ error: z.string() }), "Body over 5 MB"),
};

const routes = {
  thread: createRoute({
    ...base,
    method: "post",
    path: "/threads/{threadId}/messages:batch",
    summary: "Append many messages to a thread",
    description: `${LIMITS} ${RULES}`,
    request: {
      params: pathParams("threadId", EXAMPLES.threadId),
      ...jsonBody(z.object({ messages: messagesOf(oneThreadItem) }), {
        messages: [
          { role: "user", content: "I moved to Lisbon last spring." },
          { role: "assistant", content: "How are you finding it?" },
        ],
      }),
    },
    responses,
  }),
  cross: createRoute({
    ...base,
    method: "post",
    path: "/messages:batch",
    summary: "Append many messages across threads",
    description: `Each item names its \`threadId\`. ${LIMITS} ${RULES}`,
    request: jsonBody(z.object({ messages: messagesOf(crossThreadItem) }), {
      messages: [
        { threadId: EXAMPLES.threadId, role: "user", content: "I moved to Lisbon last spring." },
        { threadId: EXAMPLES.threadId, role: "assistant", content: "How are you finding it?" },
      ],
    }),
    responses,
  }),
};

/**
 * `POST …/threads/{threadId}/messages:batch` (one thread) and `POST …/messages:batch` (items name
 * their thread): many messages in one request and one statement (lib/working/batch.ts).
 */
export const batchRoutes = createRouter();

batchRoutes
  .openapi(routes.thread, async (c) => {
    const { threadId } = c.req.valid("param");
    const items = c.req.valid("json").messages.map((m) => ({ ...m, threadId }) as unknown as BatchItem);
    return c.json(await addMessages(projectContext(c), { messages: items }), 201);
  })
  .openapi(routes.cross, async (c) =>
    c.json(
      await addMessages(projectContext(c), { messages: c.req.valid("json").messages as unknown as BatchItem[] }),
      201,
    ),
  );

import { createRoute, z } from "@hono/zod-openapi";
import { createMiddleware } from "hono/factory";
import { integerIn } from "../../lib/numbers";
import { messageRole, perRole } from "../../lib/roles";
import { COMPACT_KEEP_RECENT, COMPACT_MAX_FOLD, compactThread } from "../../lib/working/compaction";
import { addMessage, listMessages, prepareContext, threadStats } from "../../lib/working/messages";
import { projectContext, readContext } from "../context";
import type { AppEnv } from "../env";
import { readsOnly } from "../middleware";
import { createRouter } from "../router";
import { errorResponses, failureResponse, NO_PROVIDER_NOTE } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { EXAMPLES, intQuery, pathParams } from "../schemas/inputs";
import { addMessageBody, MessageSchema } from "../schemas/messages";

const tags = ["Working memory"];
const base = { tags, security: security.apiKey };
const threadIdParam = pathParams("threadId", EXAMPLES.threadId);

const messageLimitDescription = "How many recent messages (1-100, default 20).";
const messageLimitSchema = intQuery(1, 100).openapi({ description: messageLimitDescription });
/** In the body a number, as every other numeric body field: only a query string is coerced. */
const messageLimitBody = integerIn(1, 100).optional().openapi({ description: messageLimitDescription });

/**
 * Prepare's body is optional. A client that always sends `Content-Type: application/json` may send
 * it with no body at all; that counts as no body rather than as malformed JSON.
 */
const emptyBodyIsNoBody = createMiddleware<AppEnv>(async function emptyBodyIsNoBody(c, next) {
  const raw = c.req.raw;
  if (raw.headers.has("content-type") && (!raw.body || (await raw.clone().text()).trim() === "")) {
    const headers = new Headers(raw.headers);
    headers.delete("content-type");
    headers.delete("content-length");
    c.req.raw = new Request(raw.url, { method: raw.method, headers });
  }
  await next();
});

const routes = {
  add: createRoute({
    ...base,
    method: "post",
    path: "/threads/{threadId}/messages",
    summary: "Append a message",
    request: {
      params: threadIdParam,
      ...jsonBody(addMessageBody, { role: "user", content: "I moved to Lisbon last spring, so I need a new dentist." }),
    },
    responses: {
      201: jsonResponse(
        z.object({
          messageId: z.string(),
          threadId: z.string(),
          sequenceNumber: z.number().int(),
          role: messageRole(),
          createdAt: z.string(),
          compacted: z.boolean().openapi({ description: "True when this insert triggered inline compaction." }),
        }),
        "Stored",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  list: createRoute({
    ...base,
    method: "get",
    path: "/threads/{threadId}/messages",
    summary: "List raw messages (compacted rows included)",
    description:
      "A page is the `limit` newest messages with sequenceNumber below `before`, sorted by `order`. Pass the smallest sequenceNumber of a page as the next `before` while `hasMore` is true.",
    request: {
      params: threadIdParam,
      query: z.object({
        limit: intQuery(1, 100, 20).openapi({ description: "1-100, default 20." }),
        before: intQuery(1, 2_147_483_647).openapi({ description: "Only sequenceNumber strictly less than this." }),
        order: z.enum(["asc", "desc"]).default("asc").openapi({ description: "Sort of the page (default asc)." }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({ messages: z.array(MessageSchema), total: z.number().int(), hasMore: z.boolean() }),
        "A page",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  prepare: createRoute({
    ...base,
    method: "post",
    path: "/threads/{threadId}/prepare",
    summary: "The LLM-ready context window (no model call)",
    description: "`messageLimit` may be sent in the JSON body or the query string; the body wins.",
    middleware: [readsOnly, emptyBodyIsNoBody] as const,
    request: {
      params: threadIdParam,
      query: z.object({ messageLimit: messageLimitSchema }),
      body: {
        content: {
          "application/json": { schema: z.object({ messageLimit: messageLimitBody }), example: { messageLimit: 20 } },
        },
        required: false,
      },
    },
    responses: {
      200: jsonResponse(
        z.object({
          threadId: z.string(),
          dataset: z.string(),
          messages: z.array(z.object({ role: messageRole(), content: z.string() })),
          messageCount: z.number().int(),
          truncated: z.boolean(),
          compacted: z.boolean(),
          warning: z.string().optional().openapi({
            description:
              "Present when messageLimit is below the project's autoCompactThreshold (messages may be missing), or when un-compacted messages above the threshold are left out (a compaction failed or the threshold was lowered; a later write compacts the thread).",
          }),
        }),
        "The window, oldest first",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  compact: createRoute({
    ...base,
    method: "post",
    path: "/threads/{threadId}/compact",
    summary: "Fold older messages into a summary (one model call)",
    description: `Folds the un-compacted messages except the newest ${COMPACT_KEEP_RECENT} (at most ${COMPACT_MAX_FOLD} per call) and the previous summary into one new summary message (role system). Folded messages get compactedAt; prepare no longer returns them, the message list still does. Two compactions racing on a thread never fold the same messages: the later answers the nothing-to-compact shape.`,
    request: { params: threadIdParam },
    responses: {
      200: jsonResponse(
        z.union([
          z
            .object({
              threadId: z.string(),
              summaryMessageId: z.string().openapi({ description: "The new summary message." }),
              compactedCount: z.number().int().openapi({ description: "Messages folded by this call." }),
              fromSequence: z.number().int().openapi({ description: "First sequence number the summary covers." }),
              toSequence: z.number().int().openapi({ description: "Last sequence number the summary covers." }),
            })
            .openapi("CompactResult"),
          z
            .object({ ok: z.literal(true), compacted: z.literal(false), message: z.string() })
            .openapi("NothingToCompact"),
        ]),
        "Compacted, or nothing to compact",
      ),
      401: errorResponses[401],
      404: errorResponses[404],
      500: failureResponse(
        "Failed to compact thread",
        `The model call failed; nothing was compacted${NO_PROVIDER_NOTE}`,
      ),
    },
  }),
  stats: createRoute({
    ...base,
    method: "get",
    path: "/threads/{threadId}/stats",
    summary: "Message counts, token totals and session duration",
    request: { params: threadIdParam },
    responses: {
      200: jsonResponse(
        z.object({
          threadId: z.string(),
          dataset: z.string(),
          messageCount: z.number().int(),
          byRole: z.object(perRole(() => z.number().int())),
          compactedCount: z.number().int().openapi({ description: "Messages folded into a summary." }),
          compaction: z.object({
            compactions: z.number().int().openapi({ description: "Summaries written for this thread." }),
            activeSummary: z
              .object({
                messageId: z.string(),
                fromSequence: z.number().int(),
                toSequence: z.number().int(),
                createdAt: z.string(),
              })
              .nullable()
              .openapi({ description: "The summary prepare puts first, and the sequence range it covers." }),
          }),
          tokens: z.object({ input: z.number(), output: z.number(), total: z.number() }),
          firstMessageAt: z.string().nullable(),
          lastMessageAt: z.string().nullable(),
          sessionDurationMs: z.number(),
        }),
        "Stats",
      ),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
};

/** A thread's messages and its context window: append, list, prepare, compact, stats. */
export const messageRoutes = createRouter();

messageRoutes
  .openapi(routes.add, async (c) =>
    c.json(
      await addMessage(projectContext(c), { threadId: c.req.valid("param").threadId, ...c.req.valid("json") }),
      201,
    ),
  )
  .openapi(routes.list, async (c) =>
    c.json(
      await listMessages(readContext(c), { threadId: c.req.valid("param").threadId, ...c.req.valid("query") }),
      200,
    ),
  )
  .openapi(routes.prepare, async (c) => {
    // The body is optional here; a present one is validated like any other.
    const body: { messageLimit?: number } = c.req.header("content-type")?.includes("json") ? c.req.valid("json") : {};
    const messageLimit = body.messageLimit ?? c.req.valid("query").messageLimit ?? 20;
    return c.json(await prepareContext(readContext(c), { threadId: c.req.valid("param").threadId, messageLimit }), 200);
  })
  .openapi(routes.compact, async (c) => c.json(await compactThread(projectContext(c), c.req.valid("param")), 200))
  .openapi(routes.stats, async (c) => c.json(await threadStats(readContext(c), c.req.valid("param")), 200));

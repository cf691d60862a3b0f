import { createRoute, z } from "@hono/zod-openapi";
import { streamSSE } from "hono/streaming";
import { errorFields } from "../../lib/log";
import { integerIn } from "../../lib/numbers";
import { chat, RECALL_QUERY_CHARS, startChatStream } from "../../lib/working/chat";
import { projectContext } from "../context";
import { createRouter } from "../router";
import { ErrorSchema, errorResponses, failureResponse, NO_PROVIDER_NOTE } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { EXAMPLES, pathParams, text } from "../schemas/inputs";

const chatBody = z.object({
  content: text()
    .min(1)
    .openapi({
      description: `The user's message, non-empty. It is stored as a \`user\` message before anything else (and stays stored if the reply fails), so the window sent to the model ends with it; its first ${RECALL_QUERY_CHARS} characters are the recall query.`,
    }),
  messageLimit: integerIn(1, 100).default(20).openapi({
    description:
      "How many recent un-compacted messages (the new one included) the model sees, 1-100, default 20; an active compact summary comes first and does not count, as in prepare.",
  }),
  instructions: text().max(4000).optional().openapi({
    description:
      "Extra system instructions for this reply only (up to 4000 characters), added after the service's own chat prompt. Not stored.",
  }),
  recall: z.boolean().default(true).openapi({
    description:
      "Whether to put the thread's dataset's recalled facts (the `context` block of POST /v1/memory/recall, queried with the message) in the system prompt. Default true; false skips the embedding call and the recall statement.",
  }),
});

const tokensSchema = z
  .object({ input: z.number().optional(), output: z.number().optional(), total: z.number().optional() })
  .openapi({ description: "The provider's reported usage for the reply (prompt, completion and total tokens)." });

const ChatReplySchema = z
  .object({
    threadId: z.string(),
    reply: z
      .object({
        messageId: z.string(),
        sequenceNumber: z.number().int(),
        content: z.string(),
        model: z.string().openapi({ description: "The model the provider says answered." }),
        tokens: tokensSchema,
        latencyMs: z.number().openapi({
          description: "Duration of the model call in whole milliseconds (for SSE, until its last chunk).",
        }),
        createdAt: z.string(),
      })
      .openapi({
        description: "The reply, stored as an `assistant` message with the same model, tokens and latencyMs.",
      }),
    userMessage: z
      .object({ messageId: z.string(), sequenceNumber: z.number().int(), createdAt: z.string() })
      .openapi({ description: "The stored user message." }),
    factCount: z
      .number()
      .int()
      .openapi({ description: "Recalled facts put in the system prompt (0 with recall false)." }),
    compacted: z.boolean().openapi({
      description: "True when storing the user message or the reply crossed autoCompactThreshold and compacted inline.",
    }),
  })
  .openapi("ChatReply");

const FAILED = "Failed to generate reply";

const chatRoute = createRoute({
  tags: ["Working memory"],
  security: security.apiKey,
  method: "post",
  path: "/threads/{threadId}/chat",
  summary: "Generate a reply (optionally streamed as server-sent events)",
  description: [
    "Stores the message as a `user` message, reads the window (as prepare with `messageLimit`) and recalls the dataset's facts with the message as query, makes one model call with the service's chat prompt, `instructions` and the facts as system prompt and the window as messages, then stores the reply as an `assistant` message.",
    "Cost: one embedding call (none with `recall: false` or a query embedding cached from an earlier identical query) and one model call, plus a compaction model call when an insert crosses autoCompactThreshold. Five SQL statements: authentication, the user message, the window, recall, the reply.",
    "A `tool` message in the window is sent to the model as a user message prefixed `[tool] ` (Chat Completions accepts tool messages only as answers to its own tool calls); a compact summary is sent as a system message.",
    "On a provider failure the answer is 500 `Failed to generate reply` and the user message stays stored: a retry without a key would store it again; under the same `Idempotency-Key` it gets the same 500 back (the key is kept, unlike other 5xx).",
    "While the project's monthly token budget (setting usage.monthlyTokenBudget) is spent, the answer is 429 with an `error` that says so, after the user message is stored and before any model call.",
    "With no model provider configured (neither `OPENAI_API_KEY` nor `OPENAI_BASE_URL` set) the answer is 500 `Failed to generate reply` with a `detail` that says which variables to set, after the thread check (404 first) and before anything is stored (also with `Accept: text/event-stream`); an `Idempotency-Key` is freed by it.",
    "With `Accept: text/event-stream` the reply is streamed once the provider has accepted the request (failures before that are ordinary JSON errors): `event: start` with `{threadId, userMessageId, factCount}`, one `event: delta` with `{content}` per text chunk, then `event: done` with the same body as the JSON answer, sent after the reply is stored. If the provider fails midway, `event: error` with `{error: 'Failed to generate reply'}` ends the stream and no reply is stored. If the client disconnects, the provider stream is closed and no reply is stored.",
  ].join("\n\n"),
  request: {
    params: pathParams("threadId", EXAMPLES.threadId),
    ...jsonBody(chatBody, { content: "Can you suggest a dentist near where I live?" }),
  },
  responses: {
    200: {
      description: "The stored reply (JSON), or the event stream when `Accept: text/event-stream`",
      content: {
        "application/json": { schema: ChatReplySchema },
        "text/event-stream": {
          schema: z.string().openapi({
            description:
              "Events `start` ({threadId, userMessageId, factCount}), `delta` ({content}) per chunk, then `done` (the JSON answer's body) or `error` ({error}); each `data` is one line of JSON.",
            example:
              'event: start\ndata: {"threadId":"thr_…","userMessageId":"msg_…","factCount":2}\n\nevent: delta\ndata: {"content":"Hello"}\n\nevent: done\ndata: {"threadId":"thr_…","reply":{…},…}\n\n',
          }),
        },
      },
    },
    400: errorResponses[400],
    401: errorResponses[401],
    404: jsonResponse(ErrorSchema, "Thread not found (or not in the caller's project); nothing is stored"),
    429: jsonResponse(
      ErrorSchema,
      "The project's monthly token budget is spent: the user message is stored, no reply is made",
    ),
    500: failureResponse(
      FAILED,
      `${FAILED}: the provider failed, the user message stays stored${NO_PROVIDER_NOTE} (nothing stored)`,
    ),
  },
});

/** `POST /threads/{threadId}/chat`: a reply from the model, as JSON or server-sent events. */
export const chatRoutes = createRouter().openapi(chatRoute, async (c) => {
  const ctx = projectContext(c);
  const { threadId } = c.req.valid("param");
  // Once the user message is stored, a failure is this turn's answer: replayed under its key,
  // not run again (which would store the message twice). The message's statement records it on
  // the key's claim too: if this process dies, the retry that takes the claim over answers the
  // 500 instead of storing the message again.
  const input = {
    threadId,
    ...c.req.valid("json"),
    onStored: () => c.set("wroteBeforeFailing", true),
    claim: c.get("idempotencyClaim"),
  };
  if (!c.req.header("accept")?.includes("text/event-stream")) {
    return c.json(await chat(ctx, input), 200);
  }

  // Awaited before the stream opens: a 404 or a provider refusing the call is still a JSON error.
  const turn = await startChatStream(ctx, input);
  const { deps } = ctx;
  // What a repeat under the same Idempotency-Key gets once the stream has ended (the user message
  // is stored: run again, the turn would store it twice).
  let replayed!: (events: string) => void;
  c.set("streamReplay", new Promise<string>((resolve) => (replayed = resolve)));
  return streamSSE(c, async (stream) => {
    let text = "";
    let end: SseEvent = { event: "error", data: { error: FAILED } };
    const send = (event: string, data: unknown) => stream.writeSSE({ event, data: JSON.stringify(data) });
    try {
      stream.onAbort(() => turn.abort());
      await send("start", turn.start);
      for await (const content of turn.deltas) {
        text += content;
        await send("delta", { content });
      }
      if (stream.aborted) {
        deps.log.info("chat: client disconnected; reply not stored", { threadId });
        return;
      }
      end = { event: "done", data: await turn.finish() };
      await send(end.event, end.data);
    } catch (err) {
      if (end.event === "done") return; // stored; only its event did not reach the client
      // The status line is long gone: the failure is an event, and nothing partial is stored.
      deps.log.error("chat: reply stream failed", { threadId, ...errorFields(err) });
      await send("error", { error: FAILED });
    } finally {
      const delta: SseEvent[] = text ? [{ event: "delta", data: { content: text } }] : [];
      replayed(sseText([{ event: "start", data: turn.start }, ...delta, end]));
    }
  });
});

interface SseEvent {
  event: string;
  data: unknown;
}

/** Events as `streamSSE` writes them: an `event` line and one `data` line of JSON each. */
function sseText(events: SseEvent[]): string {
  return events.map(({ event, data }) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join("");
}

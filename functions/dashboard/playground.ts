import { createRoute, z } from "@hono/zod-openapi";
import { playgroundRecall } from "../../lib/dashboard/recall";
import { dashboardProjectContext } from "../context";
import { operation } from "../router";
import { ErrorSchema, errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { pathParams } from "../schemas/inputs";
import { RecallRequestSchema, RecallResponseSchema } from "../schemas/recall";

/** `/dashboard/projects/{id}/recall`: the recall playground, with each fact's and message's signal scores. */
const base = { tags: ["Internal: dashboard"], security: security.session };
const idParam = pathParams("id");

const signal = (description: string) => z.number().nullable().openapi({ description });
const SignalScoresSchema = z
  .object({
    factId: z.string(),
    vector: signal("Cosine similarity of the fact and the query; null without an embedding (keyword and recent mode)."),
    keyword: signal(
      "BM25 over the fact and its quote, divided by the larger of the best candidate's and that of two words no other fact holds (0 to 1).",
    ),
    entity: signal(
      "1 when the fact touches an entity the query names, or one named by the two facts holding its words best (a second hop); an entity near the query gives its similarity.",
    ),
    time: signal("1 when the fact became valid in the time the query names, 0.5 when it was valid then, else 0."),
    fused: z.number().openapi({
      description: "The fact's score (relevanceScore): the signals times their weights (project settings), summed.",
    }),
  })
  .openapi("SignalScores", {
    description: "How a fact scored: each signal's value before its weight; null when that signal did not run.",
  });

const MessageSignalScoresSchema = z
  .object({
    messageId: z.string(),
    vector: signal(
      "Cosine similarity of the message and the query; null until the message is embedded (seconds after its thread's last write), without an embedding, or without a query.",
    ),
    keyword: signal(
      "BM25 over the message, divided by the larger of the best candidate's and that of two words no other message holds (0 to 1); null without a query.",
    ),
    entity: signal(
      "1 when the message names an entity of the second hop (the entities of the two facts that hold the query's words best), else 0; null without a query.",
    ),
    time: signal("1 when the message was written in the time the query names, else 0; null without a query."),
    fused: z.number().openapi({
      description:
        "The message's score (relevanceScore): the signals times the facts' weights, summed; 1 without a query.",
    }),
  })
  .openapi("MessageSignalScores", {
    description: "How a recalled message scored: each signal's value before its weight; null when it did not run.",
  });

export const playgroundOperations = {
  recall: operation(
    createRoute({
      ...base,
      method: "post",
      path: "/projects/{id}/recall",
      summary:
        "Recall playground: /v1 recall for any dataset of the project, with each fact's and message's signal scores",
      description:
        "The same embedding call, the same one SQL statement and the same reranker call as POST /v1/memory/recall (`raw` always included); the scores come from that statement.",
      request: { params: idParam, ...jsonBody(RecallRequestSchema) },
      responses: {
        200: jsonResponse(
          z.object({
            recall: RecallResponseSchema,
            mode: z.enum(["hybrid", "keyword", "recent"]).openapi({
              description:
                "hybrid: cosine, keyword, entity and time scores; keyword: the same without cosine (no embedding), the newest facts after the matches; recent: no query.",
            }),
            signals: z
              .array(SignalScoresSchema)
              .openapi({ description: "One per fact of recall.facts, same order (rank order)." }),
            messageSignals: z.array(MessageSignalScoresSchema).openapi({
              description: "One per message of recall.messages, same order; empty without `messages` in include.",
            }),
            rerank: z.enum(["reranked", "timeout", "failed", "skipped"]).nullable().openapi({
              description: "What the reranker did; null when the project's reranker is off or there is no query.",
            }),
            timing: z.array(z.object({ name: z.enum(["embedding", "sql", "rerank", "synthesis"]), ms: z.number() })),
          }),
          "The recall and how it was ranked",
        ),
        400: errorResponses[400],
        401: errorResponses[401],
        404: errorResponses[404],
        500: jsonResponse(ErrorSchema, "Nothing could be read"),
      },
    }),
    async (c) =>
      c.json(await playgroundRecall(dashboardProjectContext(c, c.req.valid("param").id), c.req.valid("json")), 200),
  ),
};

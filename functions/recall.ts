import { createRoute, z } from "@hono/zod-openapi";
import { setMetric, timing } from "hono/timing";
import { errorFields } from "../lib/log";
import { integerIn, numberIn } from "../lib/numbers";
import { eraseDataset, exportDataset } from "../lib/recall/dataset";
import { recall } from "../lib/recall/recall";
import { EpisodeSchema } from "./episodic";
import { requireApiKey } from "./middleware";
import { createRouter } from "./router";
import {
  datasetSchema,
  dateInput,
  ErrorSchema,
  errorResponses,
  Iso,
  jsonBody,
  jsonResponse,
  security,
  text,
} from "./schemas";
import { EntitySchema, FactSchema } from "./semantic";

const base = { tags: ["Recall"], security: security.apiKey };

const RankedFactSchema = FactSchema.extend({
  relevanceScore: z.number().openapi({
    description:
      "Reciprocal Rank Fusion score (about 1/61 for a rank-1 hit in one signal), comparable only within one response; 1 without a query.",
  }),
}).openapi("RankedFact");

const FactGroupSchema = z
  .object({
    entityName: z.string().openapi({
      description: "The anchor entity; for a fact touching no anchor, the entity it touches, else its subject.",
    }),
    facts: z.array(
      RankedFactSchema.pick({
        subject: true,
        predicate: true,
        object: true,
        sourceQuote: true,
        validAt: true,
        validUntil: true,
        relevanceScore: true,
      }),
    ),
    groupRelevance: z
      .number()
      .openapi({ description: "The best relevanceScore in the group; groups are in its order." }),
  })
  .openapi("FactGroup");

const RecallEpisodeSchema = EpisodeSchema.pick({
  episodeId: true,
  summary: true,
  keyLearnings: true,
  startedAt: true,
  endedAt: true,
}).extend({
  relevanceScore: z.number().openapi({
    description:
      "cosineSimilarity × similarityWeight + 1/(1 + daysSince) × recencyWeight (similarity 0 without a query).",
  }),
});

export const RecallRequestSchema = z
  .object({
    dataset: datasetSchema,
    query: text().max(2000).optional().openapi({
      description: "Up to 2000 characters; drives ranking. Omit (or send blank) for the most recent facts.",
    }),
    include: z
      .array(z.enum(["episodes", "synthesis", "raw"]))
      .default([])
      .openapi({ description: "Extra parts: `raw` (facts and groups), `episodes`, `synthesis` (one model call)." }),
    limit: integerIn(1, 100)
      .optional()
      .openapi({ description: "Facts in the block, 1-100; default the project's factsInContext (8)." }),
    minConfidence: numberIn(0, 1).optional().openapi({
      description: "0-1; default the project's retrievalMinConfidence (0.5). A value below about 1.18e-38 counts as 0.",
    }),
    asOf: dateInput.optional().openapi({
      type: "string",
      description:
        "ISO datetime or YYYY-MM-DD: only facts true at that instant (valid by then, not yet ended or invalidated); ranked by keyword and recency.",
    }),
  })
  .openapi("RecallRequest");

export const RecallResponseSchema = z
  .object({
    context: z.string().openapi({ description: "Prompt-ready block; the empty string when nothing matched." }),
    factCount: z.number().int().openapi({ description: "Facts in `context`." }),
    synthesis: z.string().nullable().openapi({
      description: "A model-written paragraph over the block; null unless included, or when context is empty.",
    }),
    facts: z.array(RankedFactSchema).nullable().openapi({ description: "The facts of the block, by relevance (raw)." }),
    groups: z.array(FactGroupSchema).nullable().openapi({ description: "The same facts by anchor entity (raw)." }),
    episodes: z
      .object({
        episodes: z.array(RecallEpisodeSchema).openapi({ description: "The top contextEpisodes completed episodes." }),
        episodeCount: z
          .number()
          .int()
          .openapi({ description: "Completed episodes of the dataset (at asOf, if given)." }),
      })
      .nullable()
      .openapi({ description: "Null unless included (or if they could not be read); never rendered into context." }),
  })
  .openapi("RecallResponse");

const ExportSchema = z
  .object({
    dataset: z.string(),
    exportedAt: Iso,
    threads: z.array(
      z.object({
        threadId: z.string(),
        tags: z.array(z.string()),
        createdAt: Iso,
        messages: z.array(z.object({ role: z.string(), content: z.string(), createdAt: Iso })),
      }),
    ),
    episodes: z.array(EpisodeSchema),
    facts: z.array(FactSchema.omit({ relevanceScore: true })),
    entities: z.array(EntitySchema),
  })
  .openapi("DatasetExport");

const datasetParam = z.object({ dataset: datasetSchema.openapi({ param: { name: "dataset", in: "path" } }) });

const routes = {
  recall: createRoute({
    ...base,
    method: "post",
    path: "/",
    summary: "What the service knows, as a prompt-ready block",
    description:
      "With a query: one embedding (cached per process for repeated queries) and one SQL statement fusing vector, entity-anchor and keyword signals by Reciprocal Rank Fusion (k = 60). Without: the most recent live facts. A `Server-Timing` header reports the embedding, SQL and synthesis times.",
    request: jsonBody(RecallRequestSchema),
    responses: {
      200: jsonResponse(RecallResponseSchema, "The recalled memory"),
      400: errorResponses[400],
      401: errorResponses[401],
      500: jsonResponse(ErrorSchema, "Failed to recall memory (nothing could be read)"),
    },
  }),
  export: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/export",
    summary: "The whole dataset, unpaginated",
    description:
      "Threads with messages, episodes, facts (live and superseded) and entities, streamed as one JSON document. An unknown dataset exports empty. If reading fails midway the body ends early and is not valid JSON.",
    request: { params: datasetParam },
    responses: {
      200: jsonResponse(ExportSchema, "The export"),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  erase: createRoute({
    ...base,
    method: "delete",
    path: "/datasets/{dataset}",
    summary: "Hard-erase a dataset",
    description:
      "Every thread, message, episode, fact and entity of the dataset, and its pending jobs, in one transaction. No undo.",
    request: { params: datasetParam },
    responses: {
      200: jsonResponse(
        z.object({
          dataset: z.string(),
          deleted: z.object({
            threads: z.number().int(),
            episodes: z.number().int(),
            facts: z.number().int(),
            entities: z.number().int(),
          }),
        }),
        "Erased (all counts 0 for an unknown dataset)",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
};

export const recallRoutes = createRouter();
recallRoutes.use("*", requireApiKey);
recallRoutes.use("/", timing({ crossOrigin: true }));

recallRoutes
  .openapi(routes.recall, async (c) => {
    const { body, timings } = await recall(c.get("deps"), c.get("apiKey").projectId, c.req.valid("json"));
    for (const t of timings) setMetric(c, t.name, t.ms, t.description);
    return c.json(body, 200);
  })
  .openapi(routes.export, async (c) => {
    const deps = c.get("deps");
    const chunks = exportDataset(deps, c.get("apiKey").projectId, c.req.valid("param").dataset);
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const next = await chunks.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value));
        } catch (err) {
          deps.log.error("export failed midway", errorFields(err));
          controller.error(err);
        }
      },
      async cancel() {
        await chunks.return(undefined);
      },
    });
    return c.body(body, 200, { "content-type": "application/json; charset=utf-8" }) as never;
  })
  .openapi(routes.erase, async (c) =>
    c.json(await eraseDataset(c.get("deps"), c.get("apiKey").projectId, c.req.valid("param").dataset), 200),
  );

import { createRoute, z } from "@hono/zod-openapi";
import { archiveEpisode, getEpisode, listEpisodes, searchEpisodes } from "../lib/episodic/episodes";
import { retryEpisode } from "../lib/episodic/triggers";
import { requireApiKey } from "./middleware";
import { createRouter } from "./router";
import {
  datasetSchema,
  dateInput,
  ErrorSchema,
  errorResponses,
  intQuery,
  jsonResponse,
  security,
  text,
} from "./schemas";

const base = { tags: ["Episodic memory"], security: security.apiKey };

const count = (description: string) => z.number().int().min(0).openapi({ description });

export const ExtractionReportSchema = z
  .object({
    proposed: count("Facts the extraction model proposed for the episode."),
    kept: count("Facts written. proposed = kept + the sum of dropped."),
    dropped: z
      .object({
        notAboutUser: count(
          'Subject not the user. "user", "the user", "I", "me", "myself" and the names the user gave count as the user (stored as "user").',
        ),
        quoteNotFound: count("sourceQuote empty or not found in any of the user's messages of the episode."),
        emptyPart: count("Subject, predicate or object blank."),
        duplicate: count(
          "The same fact twice in the answer, or a fact at or above factDedupThreshold of a live fact or of an earlier one of the answer.",
        ),
        lowConfidence: count(
          "Under a confidence floor at write time. None applies today (always 0): a fact under retrievalMinConfidence is stored, left out of recall and never ends an older fact.",
        ),
      })
      .openapi({
        description: "Proposed facts not written, by reason (each counted once, under the first that applies).",
      }),
    invalidated: count("Live facts ended because a kept fact contradicts them (not part of proposed)."),
  })
  .openapi("ExtractionReport", {
    description:
      "What one fact extraction did with the facts the model proposed: each one is kept or dropped for exactly one reason.",
  });

export const EpisodeSchema = z
  .object({
    episodeId: z.string(),
    threadId: z.string(),
    dataset: z.string(),
    projectId: z.string(),
    status: z.enum(["pending", "processing", "completed", "failed", "archived", "deleted"]),
    summary: z.string(),
    keyLearnings: z.array(z.string()),
    messageCount: z.number().int(),
    tokenCount: z.number().int().nullable(),
    startedAt: z.string().nullable(),
    endedAt: z.string().nullable(),
    processingStartedAt: z.string().nullable(),
    processingCompletedAt: z.string().nullable(),
    error: z.string().nullable().openapi({ description: "Why summarisation failed (status failed)." }),
    retryCount: z.number().int(),
    metadata: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({ description: "`{trigger: 'end' | 'idle' | 'sibling'}`: what cut the episode." }),
    extractionReport: z.union([ExtractionReportSchema, z.null()]).openapi({
      description:
        "What fact extraction did with the episode: facts proposed, kept and dropped by reason. Null until an extraction completes (and for episodes extracted before the report existed).",
    }),
    createdAt: z.string().nullable(),
    updatedAt: z.string().nullable(),
  })
  .openapi("Episode");

const datasetParam = z.object({ dataset: datasetSchema.openapi({ param: { name: "dataset", in: "path" } }) });
const episodeParam = z.object({
  episodeId: text()
    .min(1)
    .openapi({ param: { name: "episodeId", in: "path" } }),
});

const routes = {
  list: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/episodes",
    summary: "List a dataset's episodes, newest endedAt first",
    request: {
      params: datasetParam,
      query: z.object({
        limit: intQuery(1, 50, 10).openapi({ description: "1-50, default 10." }),
        before: dateInput.optional().openapi({ description: "Only episodes that ended before this (ISO datetime)." }),
        status: z
          .enum(["pending", "processing", "completed", "failed"])
          .default("completed")
          .openapi({ description: "Default completed." }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({ episodes: z.array(EpisodeSchema), total: z.number().int(), hasMore: z.boolean() }),
        "A page",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  search: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/episodes/search",
    summary: "Semantic search of completed episode summaries",
    description: "Ranked by cosineSimilarity × 0.7 + 1/(1 + daysSince) × 0.3; one embedding call.",
    request: {
      params: datasetParam,
      query: z.object({
        q: text().min(1).max(1000).openapi({ description: "Search text, 1-1000 characters." }),
        limit: intQuery(1, 20, 5).openapi({ description: "1-20, default 5." }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({ episodes: z.array(EpisodeSchema.extend({ relevanceScore: z.number() })) }),
        "Best first",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      500: jsonResponse(ErrorSchema, "The embedding call failed"),
    },
  }),
  get: createRoute({
    ...base,
    method: "get",
    path: "/episodes/{episodeId}",
    summary: "One episode",
    request: { params: episodeParam },
    responses: {
      200: jsonResponse(z.object({ episode: EpisodeSchema }), "The episode"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  archive: createRoute({
    ...base,
    method: "delete",
    path: "/episodes/{episodeId}",
    summary: "Archive an episode (soft delete: it leaves retrieval; its facts remain)",
    request: { params: episodeParam },
    responses: {
      200: jsonResponse(z.object({ episodeId: z.string(), deleted: z.literal(true) }), "Archived"),
      400: jsonResponse(ErrorSchema, "Episode is already archived"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  retry: createRoute({
    ...base,
    method: "post",
    path: "/episodes/{episodeId}/retry",
    summary: "Re-queue a failed episode now (bypasses the retry cap)",
    request: { params: episodeParam },
    responses: {
      200: jsonResponse(z.object({ episodeId: z.string(), status: z.literal("pending") }), "Queued"),
      400: jsonResponse(ErrorSchema, "Only failed episodes can be retried"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
};

export const episodicRoutes = createRouter();
episodicRoutes.use("*", requireApiKey);

episodicRoutes
  .openapi(routes.list, async (c) =>
    c.json(
      await listEpisodes(c.get("deps"), c.get("apiKey").projectId, c.req.valid("param").dataset, c.req.valid("query")),
      200,
    ),
  )
  .openapi(routes.search, async (c) => {
    const { q, limit } = c.req.valid("query");
    const episodes = await searchEpisodes(c.get("deps"), c.get("apiKey").projectId, c.req.valid("param").dataset, {
      query: q,
      limit,
    });
    return c.json({ episodes }, 200);
  })
  .openapi(routes.get, async (c) =>
    c.json(
      { episode: await getEpisode(c.get("deps"), c.get("apiKey").projectId, c.req.valid("param").episodeId) },
      200,
    ),
  )
  .openapi(routes.archive, async (c) =>
    c.json(await archiveEpisode(c.get("deps"), c.get("apiKey").projectId, c.req.valid("param").episodeId), 200),
  )
  .openapi(routes.retry, async (c) =>
    c.json(await retryEpisode(c.get("deps"), c.get("apiKey").projectId, c.req.valid("param").episodeId), 200),
  );

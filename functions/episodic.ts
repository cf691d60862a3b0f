import { createRoute, z } from "@hono/zod-openapi";
import { archiveEpisode, getEpisode, listEpisodes, searchEpisodes } from "../lib/episodic/episodes";
import { retryEpisode } from "../lib/episodic/triggers";
import { DEFAULT_SETTINGS } from "../lib/settings/settings";
import { projectContext, readContext } from "./context";
import { requireApiKey } from "./middleware";
import { createRouter } from "./router";
import { EpisodeSchema } from "./schemas/episodes";
import { ErrorSchema, errorResponses, failureResponse, NO_PROVIDER_NOTE } from "./schemas/errors";
import { jsonResponse, security } from "./schemas/http";
import { datasetPathParam, dateInput, EXAMPLES, intQuery, pathParams, text } from "./schemas/inputs";

const base = { tags: ["Episodic memory"], security: security.apiKey };

const datasetParam = datasetPathParam;
const episodeParam = pathParams("episodeId", EXAMPLES.episodeId);

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
        beforeId: text().min(1).max(64).optional().openapi({
          description:
            "Beyond the spec: with `before`, the `episodeId` of the last episode seen, so that episodes ending at that same instant (threads imported in one batch) are on the next page too: it lists those that ended before `before`, and those that ended at it with a smaller id (the order's tie-break). Without `before` it is ignored.",
        }),
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
    description: `Ranked by cosineSimilarity × ${DEFAULT_SETTINGS.episodic.similarityWeight} + 1/(1 + daysSince) × ${DEFAULT_SETTINGS.episodic.recencyWeight}; one embedding call.`,
    request: {
      params: datasetParam,
      query: z.object({
        q: text()
          .min(1)
          .max(1000)
          .openapi({ description: "Search text, 1-1000 characters.", example: "trip to Lisbon" }),
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
      500: failureResponse("Failed to search episodes", `The embedding call failed${NO_PROVIDER_NOTE}`),
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
    c.json(await listEpisodes(readContext(c), { ...c.req.valid("param"), ...c.req.valid("query") }), 200),
  )
  .openapi(routes.search, async (c) => {
    const { q, limit } = c.req.valid("query");
    const episodes = await searchEpisodes(readContext(c), {
      dataset: c.req.valid("param").dataset,
      query: q,
      limit,
    });
    return c.json({ episodes }, 200);
  })
  .openapi(routes.get, async (c) => c.json({ episode: await getEpisode(readContext(c), c.req.valid("param")) }, 200))
  .openapi(routes.archive, async (c) => c.json(await archiveEpisode(projectContext(c), c.req.valid("param")), 200))
  .openapi(routes.retry, async (c) => c.json(await retryEpisode(projectContext(c), c.req.valid("param")), 200));

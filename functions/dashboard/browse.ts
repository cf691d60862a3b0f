import { createRoute, z } from "@hono/zod-openapi";
import {
  browseDatasets,
  browseEntities,
  browseEntityFacts,
  browseEpisodes,
  browseFacts,
  browseThreadMessages,
  deleteFact,
  retryBrowseEpisode,
} from "../../lib/dashboard/browse";
import { semanticStatuses } from "../../lib/db/schema";
import { browseThreads } from "../../lib/threads";
import { dashboardProjectContext } from "../context";
import { createRouter } from "../router";
import { EpisodeSchema } from "../schemas/episodes";
import { ErrorSchema, errorResponses, ValidationErrorSchema } from "../schemas/errors";
import { FactSchema } from "../schemas/facts";
import { jsonResponse, security } from "../schemas/http";
import { boolQuery, Iso, intQuery, pageQuery, pathParams, text } from "../schemas/inputs";
import { MessageSchema } from "../schemas/messages";
import { ThreadSchema } from "../schemas/threads";

/**
 * /dashboard/browse/*: a project's memory as the dashboard shows it. Mounted inside the
 * dashboard router (functions/dashboard/routes.ts), whose requireSession covers it: one session check
 * per request.
 */
const base = { tags: ["Internal: dashboard"], security: security.session };
const idParam = pathParams("id");

const projectId = text().min(1).openapi({ description: "Project id (required)." });
const dataset = text().min(1).max(256);
const includeInvalidated = boolQuery
  .default(false)
  .openapi({ description: "Also list superseded and deleted facts (true/false, default false)." });

const BrowseDatasetSchema = z
  .object({
    dataset: z.string(),
    threads: z.number().int(),
    messages: z.number().int().openapi({ description: "Messages written (compaction summaries not counted)." }),
    episodes: z.number().int().openapi({ description: "Episodes of any status but deleted." }),
    facts: z.number().int().openapi({ description: "Every fact, superseded ones included." }),
    liveFacts: z.number().int(),
    entities: z.number().int(),
    lastActivityAt: Iso.nullable().openapi({
      description: "The latest thread creation or message, episode, fact or entity of the dataset.",
    }),
  })
  .openapi("BrowseDataset");

const BrowseMessageSchema = MessageSchema.extend({
  compacted: z.boolean().openapi({ description: "Folded into a summary: no longer in prepare's window." }),
  summary: z.boolean().openapi({ description: "A compaction summary row." }),
}).openapi("BrowseMessage");

const BrowseEpisodeSchema = EpisodeSchema.extend({
  extraction: z
    .object({
      status: z.enum(semanticStatuses),
      error: z.string().nullable(),
      attempts: z.number().int().openapi({ description: "Extraction runs started, retries included." }),
    })
    .nullable()
    .openapi({
      description: "Fact extraction (internal; hidden by /v1). Null until the episode is summarised.",
    }),
}).openapi("BrowseEpisode");

const EntityRefSchema = z.object({ entityId: z.string(), name: z.string(), type: z.string() }).openapi("EntityRef");

const BrowseFactSchema = FactSchema.extend({
  createdAt: Iso,
  entities: z.array(EntityRefSchema).openapi({ description: "The entities the fact is linked to." }),
}).openapi("BrowseFact");

const BrowseEntitySchema = EntityRefSchema.extend({
  facts: z.number().int().openapi({ description: "Live facts linked to the entity." }),
}).openapi("BrowseEntity");

const total = z.number().int().openapi({ description: "Every matching row, beyond this page too." });
const INT_MAX = 2_147_483_647;

const routes = {
  datasets: createRoute({
    ...base,
    method: "get",
    path: "/datasets",
    summary: "A project's datasets with their counts, most recently active first",
    request: { query: z.object({ projectId, ...pageQuery }) },
    responses: {
      200: jsonResponse(z.object({ datasets: z.array(BrowseDatasetSchema), total }), "Datasets"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  threads: createRoute({
    ...base,
    method: "get",
    path: "/threads",
    summary: "Browse a project's threads (offset pagination)",
    request: {
      query: z.object({
        projectId,
        dataset: dataset.optional().openapi({ description: "Only threads of this dataset." }),
        ...pageQuery,
      }),
    },
    responses: {
      200: jsonResponse(z.object({ threads: z.array(ThreadSchema), total }), "Threads, newest first"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  threadMessages: createRoute({
    ...base,
    method: "get",
    path: "/threads/{id}/messages",
    summary: "Every message of a thread, compacted ones and summaries marked, newest page first",
    description:
      "A page is the `limit` newest messages older than `before`, in reading order (oldest first); `nextCursor` fetches the next older page.",
    request: {
      params: idParam,
      query: z.object({
        projectId,
        dataset: dataset.optional().openapi({
          description: "The thread's dataset: a thread of another dataset is 404 Thread not found.",
        }),
        limit: intQuery(1, 100, 50).openapi({ description: "1-100, default 50." }),
        before: z
          .string()
          .regex(/^\d{1,10}$/, "Must be a cursor from nextCursor")
          .refine((v) => Number(v) <= INT_MAX, "Must be a cursor from nextCursor")
          .optional()
          .openapi({ description: "Opaque cursor: a previous page's nextCursor." }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({
          thread: ThreadSchema,
          messages: z.array(BrowseMessageSchema),
          activeSummary: BrowseMessageSchema.nullable().openapi({
            description: "The compaction summary prepare puts first, if any.",
          }),
          nextCursor: z.string().nullable().openapi({ description: "Null when no older message remains." }),
        }),
        "A page",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  episodes: createRoute({
    ...base,
    method: "get",
    path: "/episodes",
    summary: "A project's episodes with their fact extraction, newest first",
    request: {
      query: z.object({
        projectId,
        dataset: dataset.optional().openapi({ description: "Only episodes of this dataset." }),
        status: z
          .enum(["pending", "processing", "completed", "failed", "archived"])
          .optional()
          .openapi({ description: "Only episodes of this status (any but deleted when absent)." }),
        ...pageQuery,
      }),
    },
    responses: {
      200: jsonResponse(z.object({ episodes: z.array(BrowseEpisodeSchema), total }), "Episodes, newest first"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  retryEpisode: createRoute({
    ...base,
    method: "post",
    path: "/episodes/{id}/retry",
    summary:
      "Re-queue a failed episode now (as the /v1 retry: bypasses the retry cap), or a completed episode's failed fact extraction",
    request: { params: idParam, query: z.object({ projectId }) },
    responses: {
      200: jsonResponse(z.object({ episode: BrowseEpisodeSchema }), "Queued: the episode as it now is"),
      400: jsonResponse(
        z.union([ErrorSchema, ValidationErrorSchema]),
        "Only failed episodes can be retried; or a validation error (projectId missing)",
      ),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  facts: createRoute({
    ...base,
    method: "get",
    path: "/facts",
    summary: "A dataset's facts with their entities, newest validAt first",
    request: {
      query: z.object({
        projectId,
        dataset: dataset.openapi({ description: "Dataset (required)." }),
        includeInvalidated,
        ...pageQuery,
      }),
    },
    responses: {
      200: jsonResponse(z.object({ facts: z.array(BrowseFactSchema), total }), "Facts"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  deleteFact: createRoute({
    ...base,
    method: "delete",
    path: "/facts/{id}",
    summary: "Delete a fact permanently, with its entity links (irreversible)",
    description: "Unlike DELETE on /v1, which invalidates: the row is gone and recall can never return it.",
    request: { params: idParam, query: z.object({ projectId }) },
    responses: {
      204: { description: "Deleted" },
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  entities: createRoute({
    ...base,
    method: "get",
    path: "/entities",
    summary: "A dataset's entities by name, with their live fact counts",
    request: {
      query: z.object({ projectId, dataset: dataset.openapi({ description: "Dataset (required)." }), ...pageQuery }),
    },
    responses: {
      200: jsonResponse(z.object({ entities: z.array(BrowseEntitySchema), total }), "Entities"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  entityFacts: createRoute({
    ...base,
    method: "get",
    path: "/entities/{id}/facts",
    summary: "An entity and the facts linked to it, newest validAt first",
    request: {
      params: idParam,
      query: z.object({
        projectId,
        dataset: dataset.optional().openapi({
          description: "The entity's dataset: an entity of another dataset is 404 Entity not found.",
        }),
        includeInvalidated,
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({ entity: EntityRefSchema, facts: z.array(BrowseFactSchema) }),
        "The entity and its facts",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
};

export const browseRoutes = createRouter();

browseRoutes
  .openapi(routes.datasets, async (c) => {
    const { projectId, ...page } = c.req.valid("query");
    return c.json(await browseDatasets(dashboardProjectContext(c, projectId), page), 200);
  })
  .openapi(routes.threads, async (c) => {
    const { projectId, ...page } = c.req.valid("query");
    return c.json(await browseThreads(dashboardProjectContext(c, projectId), page), 200);
  })
  .openapi(routes.threadMessages, async (c) => {
    const { projectId, before, ...rest } = c.req.valid("query");
    const q = { threadId: c.req.valid("param").id, ...rest, before: before === undefined ? undefined : Number(before) };
    return c.json(await browseThreadMessages(dashboardProjectContext(c, projectId), q), 200);
  })
  .openapi(routes.episodes, async (c) => {
    const { projectId, ...q } = c.req.valid("query");
    return c.json(await browseEpisodes(dashboardProjectContext(c, projectId), q), 200);
  })
  .openapi(routes.retryEpisode, async (c) => {
    const ctx = dashboardProjectContext(c, c.req.valid("query").projectId);
    return c.json({ episode: await retryBrowseEpisode(ctx, { episodeId: c.req.valid("param").id }) }, 200);
  })
  .openapi(routes.facts, async (c) => {
    const { projectId, ...q } = c.req.valid("query");
    return c.json(await browseFacts(dashboardProjectContext(c, projectId), q), 200);
  })
  .openapi(routes.deleteFact, async (c) => {
    await deleteFact(dashboardProjectContext(c, c.req.valid("query").projectId), { factId: c.req.valid("param").id });
    return c.body(null, 204);
  })
  .openapi(routes.entities, async (c) => {
    const { projectId, ...q } = c.req.valid("query");
    return c.json(await browseEntities(dashboardProjectContext(c, projectId), q), 200);
  })
  .openapi(routes.entityFacts, async (c) => {
    const { projectId, ...rest } = c.req.valid("query");
    const q = { entityId: c.req.valid("param").id, ...rest };
    return c.json(await browseEntityFacts(dashboardProjectContext(c, projectId), q), 200);
  });

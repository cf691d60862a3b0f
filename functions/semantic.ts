import { createRoute, z } from "@hono/zod-openapi";
import { entityFacts, invalidateFact, listEntities, listFacts } from "../lib/semantic/facts";
import { projectContext, readContext } from "./context";
import { requireApiKey } from "./middleware";
import { createRouter } from "./router";
import { ErrorSchema, errorResponses, failureResponse } from "./schemas/errors";
import { EntitySchema, FactSchema } from "./schemas/facts";
import { jsonResponse, security } from "./schemas/http";
import { boolQuery, datasetPathParam, EXAMPLES, Iso, intQuery, text } from "./schemas/inputs";

const base = { tags: ["Semantic memory"], security: security.apiKey };

const datasetParam = datasetPathParam;
const { dataset } = datasetParam.shape;

const routes = {
  listFacts: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/facts",
    summary: "List a dataset's facts, newest validAt first",
    description:
      "Capped by `limit` and not paginated; `total` counts every matching fact. Ties on validAt are broken by factId descending.",
    request: {
      params: datasetParam,
      query: z.object({
        limit: intQuery(1, 100, 50).openapi({ description: "1-100, default 50." }),
        episodeId: text().min(1).optional().openapi({ description: "Only facts extracted from this episode." }),
        entity: text()
          .min(1)
          .optional()
          .openapi({ description: "Only facts linked to the entity of this name (case-insensitive)." }),
        includeInvalidated: boolQuery
          .default(false)
          .openapi({ description: "Also list superseded and deleted facts (true/false/1/0, default false)." }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({
          facts: z.array(FactSchema).openapi({ description: "At most `limit` facts." }),
          total: z.number().int().openapi({ description: "Every fact matching the filters, beyond `limit` too." }),
        }),
        "The facts",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  deleteFact: createRoute({
    ...base,
    method: "delete",
    path: "/datasets/{dataset}/facts/{factId}",
    summary: "Invalidate a fact (soft delete: it leaves retrieval; the row remains)",
    description:
      "Stamps invalidAt; validUntil is unchanged. A second call, another dataset's fact or an unknown id: 404 Fact not found.",
    request: {
      params: z.object({
        dataset,
        factId: text()
          .min(1)
          .openapi({ param: { name: "factId", in: "path", example: EXAMPLES.factId }, description: "The fact's id." }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({
          factId: z.string().openapi({ description: "The invalidated fact." }),
          invalidatedAt: Iso.openapi({ description: "The invalidAt now stamped on it." }),
        }),
        "Invalidated",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: jsonResponse(ErrorSchema, "Fact not found: unknown, in another dataset or project, or already invalidated"),
    },
  }),
  listEntities: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/entities",
    summary: "Every entity of a dataset, by name",
    description: "Unpaginated. One name may appear under two types.",
    request: { params: datasetParam },
    responses: {
      200: jsonResponse(
        z.object({ entities: z.array(EntitySchema).openapi({ description: "All of them, ordered by name." }) }),
        "The entities",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      500: failureResponse("Failed to list entities"),
    },
  }),
  entityFacts: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/entities/{name}/facts",
    summary: "Live facts linked to an entity",
    description: "Matched by name, case-insensitively, across types. An unknown entity gives 200 with `{facts: []}`.",
    request: {
      params: z.object({
        dataset,
        name: text()
          .min(1)
          .openapi({
            param: { name: "name", in: "path", example: EXAMPLES.entity },
            description: "Entity name, percent-encoded.",
          }),
      }),
    },
    responses: {
      200: jsonResponse(
        z.object({ facts: z.array(FactSchema).openapi({ description: "Newest validAt first; live facts only." }) }),
        "The facts",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
};

export const semanticRoutes = createRouter();
semanticRoutes.use("*", requireApiKey);

semanticRoutes
  .openapi(routes.listFacts, async (c) =>
    c.json(await listFacts(readContext(c), { ...c.req.valid("param"), ...c.req.valid("query") }), 200),
  )
  .openapi(routes.deleteFact, async (c) => c.json(await invalidateFact(projectContext(c), c.req.valid("param")), 200))
  .openapi(routes.listEntities, async (c) => c.json(await listEntities(readContext(c), c.req.valid("param")), 200))
  .openapi(routes.entityFacts, async (c) => c.json(await entityFacts(readContext(c), c.req.valid("param")), 200));

import { createRoute, z } from "@hono/zod-openapi";
import { createApiKey, listApiKeys, revokeApiKey } from "../../lib/api-keys";
import { dashboardProjectContext } from "../context";
import { operation } from "../router";
import { errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { pageQuery, pathParams, text } from "../schemas/inputs";

/** `/dashboard/api-keys`: a project's API keys. */
const base = { tags: ["Internal: dashboard"], security: security.session };
const idParam = pathParams("id");

const ApiKeyRecordSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    keyPreview: z.string().openapi({ description: "Prefix and last characters; the key itself is never shown again." }),
    projectId: z.string().nullable(),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable(),
    revokedAt: z.string().nullable(),
  })
  .openapi("ApiKey");
const projectIdQuery = z.string().min(1).openapi({ description: "Project id." });

export const keyOperations = {
  create: operation(
    createRoute({
      ...base,
      method: "post",
      path: "/api-keys",
      summary: "Create an API key (the key is shown only in this response)",
      request: jsonBody(
        z.object({
          name: text().trim().min(1).max(100).openapi({ description: "Label for the key." }),
          projectId: text().min(1).openapi({ description: "Project the key belongs to." }),
        }),
      ),
      responses: {
        201: jsonResponse(
          z.object({
            key: z.string().openapi({ description: "The plaintext key (67 characters)." }),
            apiKey: ApiKeyRecordSchema,
          }),
          "Created",
        ),
        400: errorResponses[400],
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) => {
      const { projectId, ...input } = c.req.valid("json");
      return c.json(await createApiKey(dashboardProjectContext(c, projectId), input), 201);
    },
  ),
  list: operation(
    createRoute({
      ...base,
      method: "get",
      path: "/api-keys",
      summary: "List a project's API keys",
      request: { query: z.object({ projectId: projectIdQuery, ...pageQuery }) },
      responses: {
        200: jsonResponse(
          z.object({ apiKeys: z.array(ApiKeyRecordSchema), total: z.number().int() }),
          "Keys, newest first",
        ),
        400: errorResponses[400],
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) => {
      const { projectId, ...page } = c.req.valid("query");
      return c.json(await listApiKeys(dashboardProjectContext(c, projectId), page), 200);
    },
  ),
  revoke: operation(
    createRoute({
      ...base,
      method: "delete",
      path: "/api-keys/{id}",
      summary: "Revoke an API key (immediate and permanent)",
      request: { params: idParam },
      responses: {
        200: jsonResponse(z.object({ apiKey: ApiKeyRecordSchema }), "Revoked"),
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) => c.json(await revokeApiKey(c.get("deps"), { apiKeyId: c.req.valid("param").id }), 200),
  ),
};

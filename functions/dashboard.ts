import { createRoute, z } from "@hono/zod-openapi";
import { createApiKey, listApiKeys, revokeApiKey } from "../lib/api-keys";
import { providerConfigured } from "../lib/config";
import { extractionFailures, getProject, projectActivity } from "../lib/dashboard/project";
import { playgroundRecall } from "../lib/dashboard/recall";
import { projectSettingFields, resetProjectSetting, SETTING_GROUPS } from "../lib/dashboard/settings";
import {
  createProject,
  deleteProject,
  getProjectSettings,
  listProjects,
  patchProjectSettings,
  projectStats,
} from "../lib/projects";
import { settingsPatchSchema } from "../lib/settings";
import { createUser, deleteUser, listUsers } from "../lib/users";
import { UserSchema } from "./auth";
import { browseRoutes } from "./dashboard-browse";
import { webhookRoutes } from "./dashboard-webhooks";
import { requireSession } from "./middleware";
import { RecallRequestSchema, RecallResponseSchema } from "./recall";
import { createRouter } from "./router";
import {
  ErrorSchema,
  errorResponses,
  Iso,
  intQuery,
  jsonBody,
  jsonResponse,
  pageQuery,
  security,
  text,
} from "./schemas";

const tags = ["Internal: dashboard"];
const base = { tags, security: security.session };

const ProjectSchema = z.object({ id: z.string(), name: z.string(), createdAt: z.string() }).openapi("Project");
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
const SettingsSchema = z
  .object({
    working: z.record(z.string(), z.unknown()),
    episodic: z.record(z.string(), z.unknown()),
    semantic: z.record(z.string(), z.unknown()),
  })
  .openapi("ProjectSettings", { description: "Fully merged settings (defaults, then the project's values)." });

const idParam = z.object({
  id: z
    .string()
    .min(1)
    .openapi({ param: { name: "id", in: "path" } }),
});
const projectIdQuery = z.string().min(1).openapi({ description: "Project id." });

const settingValue = z.union([z.boolean(), z.number()]).nullable();
const SettingFieldSchema = z
  .object({
    group: z.enum(SETTING_GROUPS as [string, ...string[]]),
    key: z.string(),
    type: z.enum(["boolean", "integer", "number"]),
    nullable: z.boolean().openapi({ description: "null is accepted (it turns the feature off)." }),
    minimum: z.number().nullable(),
    maximum: z.number().nullable(),
    default: settingValue,
    value: settingValue.openapi({ description: "The merged value: the project's own, else the default." }),
    overridden: z.boolean().openapi({ description: "The project stores its own value for this key." }),
    description: z.string(),
  })
  .openapi("SettingField", {
    description: "One setting as the settings form shows it; the bounds are those PATCH validates with.",
  });
const fieldsResponse = z.object({ fields: z.array(SettingFieldSchema) });

const signal = (description: string) => z.number().nullable().openapi({ description });
const SignalScoresSchema = z
  .object({
    factId: z.string(),
    vector: signal("Cosine similarity of the fact and the query; null without an embedding (keyword and recent mode)."),
    keyword: signal("BM25 over the fact and its quote, divided by the best candidate's (0 to 1)."),
    entity: signal("1 when the fact touches an entity the query names; an entity near the query gives its similarity."),
    time: signal("1 when the fact became valid in the time the query names, 0.5 when it was valid then, else 0."),
    fused: z.number().openapi({
      description: "The fact's score (relevanceScore): the signals times their weights (project settings), summed.",
    }),
  })
  .openapi("SignalScores", {
    description: "How a fact scored: each signal's value before its weight; null when that signal did not run.",
  });

const routes = {
  createProject: createRoute({
    ...base,
    method: "post",
    path: "/projects",
    summary: "Create a project",
    request: jsonBody(
      z.object({
        name: text().trim().min(1).max(100).openapi({ description: "Project name (1-100 characters)." }),
      }),
    ),
    responses: {
      201: jsonResponse(z.object({ project: ProjectSchema }), "Created"),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  listProjects: createRoute({
    ...base,
    method: "get",
    path: "/projects",
    summary: "List projects",
    request: { query: z.object(pageQuery) },
    responses: {
      200: jsonResponse(
        z.object({ projects: z.array(ProjectSchema), total: z.number().int() }),
        "Projects, newest first",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  deleteProject: createRoute({
    ...base,
    method: "delete",
    path: "/projects/{id}",
    summary: "Delete a project and everything in it (irreversible)",
    request: { params: idParam },
    responses: { 204: { description: "Deleted" }, 401: errorResponses[401], 404: errorResponses[404] },
  }),
  stats: createRoute({
    ...base,
    method: "get",
    path: "/projects/{id}/stats",
    summary: "A project's overview counts, fact extraction failures included",
    description:
      "Fact extraction status is internal and never shown on /v1; it is counted here so operators see failures.",
    request: { params: idParam },
    responses: {
      200: jsonResponse(
        z.object({
          stats: z.object({
            threads: z.number().int(),
            messages: z.number().int(),
            episodes: z
              .record(z.string(), z.number().int())
              .openapi({ description: "Episodes by status: pending, processing, completed, failed, archived." }),
            extraction: z.record(z.string(), z.number().int()).openapi({
              description:
                "Completed episodes by fact-extraction status: pending, processing, completed, failed, skipped.",
            }),
            facts: z.object({ live: z.number().int(), superseded: z.number().int() }),
            entities: z.number().int(),
          }),
        }),
        "Counts",
      ),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  getSettings: createRoute({
    ...base,
    method: "get",
    path: "/projects/{id}/settings",
    summary: "A project's merged settings",
    request: { params: idParam },
    responses: {
      200: jsonResponse(z.object({ settings: SettingsSchema }), "Settings"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  patchSettings: createRoute({
    ...base,
    method: "patch",
    path: "/projects/{id}/settings",
    summary: "Deep-merge a partial settings object into the project's settings",
    request: { params: idParam, ...jsonBody(settingsPatchSchema) },
    responses: {
      200: jsonResponse(z.object({ settings: SettingsSchema }), "Settings after the merge"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  createApiKey: createRoute({
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
  listApiKeys: createRoute({
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
    },
  }),
  revokeApiKey: createRoute({
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
  listUsers: createRoute({
    ...base,
    method: "get",
    path: "/users",
    summary: "List dashboard users",
    request: { query: z.object(pageQuery) },
    responses: {
      200: jsonResponse(z.object({ users: z.array(UserSchema), total: z.number().int() }), "Users"),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  createUser: createRoute({
    ...base,
    method: "post",
    path: "/users",
    summary: "Create a dashboard user",
    request: jsonBody(
      z.object({
        username: text().min(1).max(100).openapi({ description: "1-100 characters." }),
        password: z.string().min(6).max(200).openapi({ description: "6-200 characters." }),
      }),
    ),
    responses: {
      201: jsonResponse(z.object({ user: UserSchema }), "Created"),
      400: errorResponses[400],
      401: errorResponses[401],
      409: jsonResponse(ErrorSchema, "Username already taken"),
    },
  }),
  deleteUser: createRoute({
    ...base,
    method: "delete",
    path: "/users/{id}",
    summary: "Delete a dashboard user (not yourself, not the last one)",
    request: { params: idParam },
    responses: {
      204: { description: "Deleted" },
      400: jsonResponse(ErrorSchema, "You cannot delete your own account / Cannot delete the last user"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  getProject: createRoute({
    ...base,
    method: "get",
    path: "/projects/{id}",
    summary: "One project",
    request: { params: idParam },
    responses: {
      200: jsonResponse(z.object({ project: ProjectSchema }), "The project"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  settingFields: createRoute({
    ...base,
    method: "get",
    path: "/projects/{id}/settings/fields",
    summary: "A project's settings as form fields: type, bounds, default, value, overridden",
    description: "Groups working, episodic, semantic; keys in the defaults' order.",
    request: { params: idParam },
    responses: {
      200: jsonResponse(fieldsResponse, "Fields"),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  resetSetting: createRoute({
    ...base,
    method: "delete",
    path: "/projects/{id}/settings/{group}/{key}",
    summary: "Remove the project's own value of a setting, so the default applies again",
    description:
      "A setting the project does not override is left alone (200). Rejected with 400 when the default would break contradictionBandMin <= factDedupThreshold.",
    request: {
      params: idParam.extend({
        group: z
          .string()
          .min(1)
          .openapi({ param: { name: "group", in: "path" }, description: "working, episodic or semantic." }),
        key: z
          .string()
          .min(1)
          .openapi({ param: { name: "key", in: "path" } }),
      }),
    },
    responses: {
      200: jsonResponse(fieldsResponse, "The fields after the removal"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: jsonResponse(ErrorSchema, "Project not found / Setting not found"),
    },
  }),
  activity: createRoute({
    ...base,
    method: "get",
    path: "/projects/{id}/activity",
    summary: "Episodes and facts created per UTC day, oldest first, today last",
    request: {
      params: idParam,
      query: z.object({ days: intQuery(1, 365, 30).openapi({ description: "1-365, default 30." }) }),
    },
    responses: {
      200: jsonResponse(
        z.object({
          days: z.array(
            z.object({
              day: z.string().openapi({ description: "YYYY-MM-DD (UTC)." }),
              episodes: z.number().int().openapi({ description: "Episodes created that day, any status." }),
              facts: z.number().int().openapi({ description: "Facts created that day." }),
            }),
          ),
        }),
        "One entry per day, days without activity included",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  extractionFailures: createRoute({
    ...base,
    method: "get",
    path: "/projects/{id}/extraction-failures",
    summary: "Completed episodes whose fact extraction failed (hidden by /v1), newest first",
    request: { params: idParam, query: z.object(pageQuery) },
    responses: {
      200: jsonResponse(
        z.object({
          failures: z.array(
            z
              .object({
                episodeId: z.string(),
                threadId: z.string(),
                dataset: z.string(),
                error: z.string().nullable(),
                attempts: z.number().int().openapi({ description: "Extraction runs, retries included." }),
                failedAt: Iso.nullable(),
              })
              .openapi("ExtractionFailure"),
          ),
          total: z.number().int(),
        }),
        "Failures",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  provider: createRoute({
    ...base,
    method: "get",
    path: "/provider",
    summary: "Whether a model provider is configured, and the models the service uses",
    description:
      "Read from the configuration, no provider call. Without a provider (neither OPENAI_API_KEY nor OPENAI_BASE_URL set) chat answers 503 and episodes and fact extraction fail; the dashboard shows a banner.",
    responses: {
      200: jsonResponse(
        z.object({
          provider: z
            .object({
              configured: z.boolean().openapi({ description: "OPENAI_API_KEY or OPENAI_BASE_URL is set." }),
              llmModel: z.string(),
              embeddingModel: z.string(),
              embeddingDimensions: z.number().int(),
            })
            .openapi("ProviderStatus"),
        }),
        "The provider's configuration",
      ),
      401: errorResponses[401],
    },
  }),
  recall: createRoute({
    ...base,
    method: "post",
    path: "/projects/{id}/recall",
    summary: "Recall playground: /v1 recall for any dataset of the project, with each fact's signal scores",
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
};

export const dashboardRoutes = createRouter();
dashboardRoutes.use("*", requireSession);

dashboardRoutes
  .openapi(routes.createProject, async (c) =>
    c.json({ project: await createProject(c.get("deps"), c.req.valid("json").name) }, 201),
  )
  .openapi(routes.listProjects, async (c) => c.json(await listProjects(c.get("deps"), c.req.valid("query")), 200))
  .openapi(routes.deleteProject, async (c) => {
    await deleteProject(c.get("deps"), c.req.valid("param").id);
    return c.body(null, 204);
  })
  .openapi(routes.stats, async (c) =>
    c.json({ stats: await projectStats(c.get("deps"), c.req.valid("param").id) }, 200),
  )
  .openapi(routes.getSettings, async (c) =>
    c.json({ settings: await getProjectSettings(c.get("deps"), c.req.valid("param").id) }, 200),
  )
  .openapi(routes.patchSettings, async (c) =>
    c.json({ settings: await patchProjectSettings(c.get("deps"), c.req.valid("param").id, c.req.valid("json")) }, 200),
  )
  .openapi(routes.createApiKey, async (c) => c.json(await createApiKey(c.get("deps"), c.req.valid("json")), 201))
  .openapi(routes.listApiKeys, async (c) => {
    const { projectId, ...page } = c.req.valid("query");
    return c.json(await listApiKeys(c.get("deps"), projectId, page), 200);
  })
  .openapi(routes.revokeApiKey, async (c) => c.json(await revokeApiKey(c.get("deps"), c.req.valid("param").id), 200))
  .openapi(routes.listUsers, async (c) => c.json(await listUsers(c.get("deps"), c.req.valid("query")), 200))
  .openapi(routes.createUser, async (c) => c.json({ user: await createUser(c.get("deps"), c.req.valid("json")) }, 201))
  .openapi(routes.deleteUser, async (c) => {
    await deleteUser(c.get("deps"), c.get("session").userId, c.req.valid("param").id);
    return c.body(null, 204);
  })
  .openapi(routes.getProject, async (c) =>
    c.json({ project: await getProject(c.get("deps"), c.req.valid("param").id) }, 200),
  )
  .openapi(routes.settingFields, async (c) =>
    c.json({ fields: await projectSettingFields(c.get("deps"), c.req.valid("param").id) }, 200),
  )
  .openapi(routes.resetSetting, async (c) => {
    const { id, group, key } = c.req.valid("param");
    return c.json({ fields: await resetProjectSetting(c.get("deps"), id, group, key) }, 200);
  })
  .openapi(routes.activity, async (c) =>
    c.json({ days: await projectActivity(c.get("deps"), c.req.valid("param").id, c.req.valid("query").days) }, 200),
  )
  .openapi(routes.extractionFailures, async (c) =>
    c.json(await extractionFailures(c.get("deps"), c.req.valid("param").id, c.req.valid("query")), 200),
  )
  .openapi(routes.provider, (c) => {
    const { config } = c.get("deps");
    const { llmModel, embeddingModel, embeddingDimensions } = config.openai;
    return c.json(
      { provider: { configured: providerConfigured(config), llmModel, embeddingModel, embeddingDimensions } },
      200,
    );
  })
  .openapi(routes.recall, async (c) =>
    c.json(await playgroundRecall(c.get("deps"), c.req.valid("param").id, c.req.valid("json")), 200),
  );

// After the session check above, so /browse/* is covered by it (one check per request).
dashboardRoutes.route("/browse", browseRoutes);
dashboardRoutes.route("/webhooks", webhookRoutes);

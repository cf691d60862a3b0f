import { createRoute, z } from "@hono/zod-openapi";
import { createApiKey, listApiKeys, revokeApiKey } from "../lib/api-keys";
import {
  createProject,
  deleteProject,
  getProjectSettings,
  listProjects,
  patchProjectSettings,
  projectStats,
} from "../lib/projects";
import { settingsPatchSchema } from "../lib/settings";
import { browseThreads } from "../lib/threads";
import { createUser, deleteUser, listUsers } from "../lib/users";
import { UserSchema } from "./auth";
import { requireSession } from "./middleware";
import { createRouter } from "./router";
import { ErrorSchema, errorResponses, jsonBody, jsonResponse, pageQuery, security, text } from "./schemas";
import { ThreadSchema } from "./threads";

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
  browseThreads: createRoute({
    ...base,
    method: "get",
    path: "/browse/threads",
    summary: "Browse a project's threads (offset pagination)",
    request: {
      query: z.object({
        projectId: projectIdQuery,
        dataset: z.string().min(1).max(256).optional().openapi({ description: "Only threads of this dataset." }),
        ...pageQuery,
      }),
    },
    responses: {
      200: jsonResponse(z.object({ threads: z.array(ThreadSchema), total: z.number().int() }), "Threads, newest first"),
      400: errorResponses[400],
      401: errorResponses[401],
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
  .openapi(routes.browseThreads, async (c) => {
    const { projectId, ...page } = c.req.valid("query");
    return c.json(await browseThreads(c.get("deps"), projectId, page), 200);
  });

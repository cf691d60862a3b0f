import { createRoute, z } from "@hono/zod-openapi";
import { extractionFailures, getProject, projectActivity } from "../../lib/dashboard/project";
import { createProject, deleteProject, listProjects, projectStats } from "../../lib/projects";
import { dashboardProjectContext } from "../context";
import { operation } from "../router";
import { ErrorSchema, errorResponses } from "../schemas/errors";
import { jsonBody, jsonResponse, security } from "../schemas/http";
import { Iso, intQuery, pageQuery, pathParams, text } from "../schemas/inputs";

/** `/dashboard/projects`: create, list, read and delete projects; their counts and activity. */
const base = { tags: ["Internal: dashboard"], security: security.session };
const idParam = pathParams("id");

const ProjectSchema = z.object({ id: z.string(), name: z.string(), createdAt: z.string() }).openapi("Project");

export const projectOperations = {
  create: operation(
    createRoute({
      ...base,
      method: "post",
      path: "/projects",
      summary: "Create a project",
      request: jsonBody(
        z.object({
          name: text().trim().min(1).max(100).openapi({
            description:
              "Project name (1-100 characters, without the spaces around them), unique: another project's name, in any case, is a 409.",
          }),
        }),
      ),
      responses: {
        201: jsonResponse(z.object({ project: ProjectSchema }), "Created"),
        400: errorResponses[400],
        401: errorResponses[401],
        409: jsonResponse(ErrorSchema, "Project name already taken"),
      },
    }),
    async (c) => c.json({ project: await createProject(c.get("deps"), c.req.valid("json")) }, 201),
  ),
  list: operation(
    createRoute({
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
    async (c) => c.json(await listProjects(c.get("deps"), c.req.valid("query")), 200),
  ),
  remove: operation(
    createRoute({
      ...base,
      method: "delete",
      path: "/projects/{id}",
      summary: "Delete a project and everything in it (irreversible)",
      request: { params: idParam },
      responses: { 204: { description: "Deleted" }, 401: errorResponses[401], 404: errorResponses[404] },
    }),
    async (c) => {
      await deleteProject(dashboardProjectContext(c, c.req.valid("param").id));
      return c.body(null, 204);
    },
  ),
  stats: operation(
    createRoute({
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
    async (c) => c.json({ stats: await projectStats(dashboardProjectContext(c, c.req.valid("param").id)) }, 200),
  ),
  get: operation(
    createRoute({
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
    async (c) => c.json({ project: await getProject(dashboardProjectContext(c, c.req.valid("param").id)) }, 200),
  ),
  activity: operation(
    createRoute({
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
    async (c) =>
      c.json(
        { days: await projectActivity(dashboardProjectContext(c, c.req.valid("param").id), c.req.valid("query")) },
        200,
      ),
  ),
  extractionFailures: operation(
    createRoute({
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
    async (c) =>
      c.json(await extractionFailures(dashboardProjectContext(c, c.req.valid("param").id), c.req.valid("query")), 200),
  ),
};

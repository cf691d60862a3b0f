import { createRoute, z } from "@hono/zod-openapi";
import { failingJobs, retryJobNow } from "../../lib/dashboard/jobs";
import { dashboardProjectContext } from "../context";
import { operation } from "../router";
import { ErrorSchema, errorResponses } from "../schemas/errors";
import { jsonResponse, security } from "../schemas/http";
import { Iso, pageQuery, pathParams } from "../schemas/inputs";

/** `/dashboard/projects/:id/failing-jobs`: background jobs waiting to retry after an error, and running one now. */
const base = { tags: ["Internal: dashboard"], security: security.session };

const FailingJobSchema = z
  .object({
    jobId: z.string(),
    kind: z.string().openapi({
      description: "message-embed (a thread's message vectors), episode, thread-idle (an idle timer) or webhook.",
    }),
    subject: z.string().nullable().openapi({ description: "The thread, episode or webhook delivery it works on." }),
    dataset: z.string().nullable(),
    attempts: z
      .number()
      .int()
      .openapi({ description: "Attempts so far; each failure doubles the wait, up to 32 minutes." }),
    error: z.string().nullable().openapi({ description: "The last attempt's error." }),
    lastAttemptAt: Iso.nullable(),
    nextRunAt: Iso.nullable(),
    running: z.boolean().openapi({ description: "An attempt is running now." }),
  })
  .openapi("FailingJob");

export const jobOperations = {
  failing: operation(
    createRoute({
      ...base,
      method: "get",
      path: "/projects/{id}/failing-jobs",
      summary: "A project's background jobs that failed and wait to retry, latest attempt first",
      request: { params: pathParams("id"), query: z.object(pageQuery) },
      responses: {
        200: jsonResponse(z.object({ jobs: z.array(FailingJobSchema), total: z.number().int() }), "Failing jobs"),
        400: errorResponses[400],
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) =>
      c.json(await failingJobs(dashboardProjectContext(c, c.req.valid("param").id), c.req.valid("query")), 200),
  ),
  retry: operation(
    createRoute({
      ...base,
      method: "post",
      path: "/projects/{id}/failing-jobs/{jobId}/retry",
      summary: "Run a failing job now instead of at the end of its backoff",
      request: { params: pathParams("id").merge(pathParams("jobId")) },
      responses: {
        200: jsonResponse(z.object({ job: FailingJobSchema }), "Due now; its doorbell is rung"),
        401: errorResponses[401],
        404: jsonResponse(
          ErrorSchema,
          "Project not found, or Job not found: no such failing job in the project (it ran and succeeded meanwhile, or never failed)",
        ),
        409: jsonResponse(ErrorSchema, "The job is running"),
      },
    }),
    async (c) => {
      const { id, jobId } = c.req.valid("param");
      return c.json({ job: await retryJobNow(dashboardProjectContext(c, id), { jobId }) }, 200);
    },
  ),
};

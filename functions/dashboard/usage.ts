import { createRoute, z } from "@hono/zod-openapi";
import { usageOverview } from "../../lib/usage/ledger";
import { dashboardProjectContext } from "../context";
import { operation } from "../router";
import { errorResponses } from "../schemas/errors";
import { jsonResponse, security } from "../schemas/http";
import { pathParams } from "../schemas/inputs";
import { BudgetStateSchema, UsageGroupSchema, UsageTotalsSchema, usageRangeQuery } from "../schemas/usage";

/** `/dashboard/projects/{id}/usage`: the usage page's data, in one statement. */
export const usageOperations = {
  overview: operation(
    createRoute({
      tags: ["Internal: dashboard"],
      security: security.session,
      method: "get",
      path: "/projects/{id}/usage",
      summary: "A project's usage ledger: tokens per day, top datasets, operations, models, and its budget",
      description: "As GET /v1/usage, grouped four ways at once for the dashboard's usage page.",
      request: { params: pathParams("id"), query: z.object(usageRangeQuery) },
      responses: {
        200: jsonResponse(
          z.object({
            start: z.string(),
            end: z.string(),
            days: z.array(UsageGroupSchema).openapi({ description: "Days (UTC) with calls, oldest first." }),
            datasets: z
              .array(UsageGroupSchema)
              .openapi({ description: "The 10 datasets with the most tokens (key null: calls of no dataset)." }),
            operations: z.array(UsageGroupSchema).openapi({ description: "Every operation, most tokens first." }),
            models: z.array(UsageGroupSchema).openapi({ description: "Every model, most tokens first." }),
            total: UsageTotalsSchema,
            budget: BudgetStateSchema,
          }),
          "The usage",
        ),
        400: errorResponses[400],
        401: errorResponses[401],
        404: errorResponses[404],
      },
    }),
    async (c) =>
      c.json(await usageOverview(dashboardProjectContext(c, c.req.valid("param").id), c.req.valid("query")), 200),
  ),
};

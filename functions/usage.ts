import { createRoute, z } from "@hono/zod-openapi";
import { readUsage } from "../lib/usage/ledger";
import { readContext } from "./context";
import { requireApiKey } from "./middleware";
import { createRouter } from "./router";
import { errorResponses } from "./schemas/errors";
import { jsonResponse, security } from "./schemas/http";
import { intQuery } from "./schemas/inputs";
import { groupByQuery, UsageReportSchema, usageRangeQuery } from "./schemas/usage";

const usageRoute = createRoute({
  tags: ["Usage"],
  security: security.apiKey,
  method: "get",
  path: "/",
  summary: "What the project's model calls cost: the usage ledger, grouped, and the monthly budget",
  description: [
    "Every model, embedding and rerank call the service made for the API key's project (episodes, extraction, the contradiction judge, recall's query embedding, reranking and synthesis, chat, compaction, message embeddings), with the tokens the provider reported. A call whose provider reported no usage counts in `unknownCalls`, not as zero tokens.",
    "Grouped by `groupBy` over `[start, end)`; `budget` says where the project stands this month. One SQL statement.",
  ].join("\n\n"),
  request: {
    query: z.object({
      ...usageRangeQuery,
      groupBy: groupByQuery,
      limit: intQuery(1, 1000).openapi({
        description:
          "Keep the first this many groups (not for days, which are all listed); the totals count every call.",
      }),
    }),
  },
  responses: {
    200: jsonResponse(UsageReportSchema, "The ledger over the range"),
    400: errorResponses[400],
    401: errorResponses[401],
  },
});

/** `GET /v1/usage`: the ledger of the API key's own project. */
export const usageRoutes = createRouter();
usageRoutes.use("*", requireApiKey);
usageRoutes.openapi(usageRoute, async (c) => c.json(await readUsage(readContext(c), c.req.valid("query")), 200));

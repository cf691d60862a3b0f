import { createRoute, z } from "@hono/zod-openapi";
import { checkHealth } from "../lib/health";
import { createRouter } from "./router";
import { jsonResponse } from "./schemas/http";

const HealthSchema = z.object({ status: z.string(), services: z.object({ postgres: z.string() }) }).openapi("Health");

const route = createRoute({
  method: "get",
  path: "/",
  tags: ["Health"],
  summary: "Liveness of the service and its database",
  responses: {
    200: jsonResponse(HealthSchema, "All ok"),
    503: jsonResponse(HealthSchema, "The database does not answer"),
  },
});

export const healthRoutes = createRouter().openapi(route, async (c) => {
  const result = await checkHealth(c.get("deps"));
  return result.ok ? c.json(result.body, 200) : c.json(result.body, 503);
});

import type { z } from "@hono/zod-openapi";

/** A JSON response of a route: its schema and what it means. */
export const jsonResponse = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { "application/json": { schema } },
  description,
});

/** A required JSON body (otherwise a missing content type would skip validation). */
export const jsonBody = <T extends z.ZodType>(schema: T, description = "JSON body") => ({
  body: { content: { "application/json": { schema } }, required: true, description },
});

export const security = {
  apiKey: [{ apiKey: [] }],
  session: [{ session: [] }],
};

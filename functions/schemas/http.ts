import type { z } from "@hono/zod-openapi";

/** A JSON response of a route: its schema and what it means. */
export const jsonResponse = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { "application/json": { schema } },
  description,
});

/**
 * A required JSON body (otherwise a missing content type would skip validation). `example` is the
 * body the API reference shows and its "Test request" sends: a realistic one, which validates.
 */
export const jsonBody = <T extends z.ZodType>(schema: T, example?: z.input<T>) => ({
  body: {
    content: { "application/json": { schema, ...(example === undefined ? {} : { example }) } },
    required: true,
    description: "JSON body",
  },
});

export const security = {
  apiKey: [{ apiKey: [] }],
  session: [{ session: [] }],
};

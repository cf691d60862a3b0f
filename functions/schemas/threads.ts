import { z } from "@hono/zod-openapi";

export const ThreadSchema = z
  .object({
    threadId: z.string(),
    dataset: z.string(),
    tags: z.array(z.string()),
    settings: z.object({ episodic: z.record(z.string(), z.unknown()).optional() }).openapi({
      description: "The thread's creation-time episodic override (null values already stripped).",
    }),
    messageCount: z.number().int().openapi({ description: "Messages appended so far." }),
    lastMessageAt: z.string().nullable(),
    endedAt: z.string().nullable().openapi({ description: "When the thread was last ended, if ever." }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Thread");

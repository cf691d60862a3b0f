import { createRoute, z } from "@hono/zod-openapi";
import { endThread } from "../lib/episodic/triggers";
import { threadEpisodicOverride } from "../lib/settings/settings";
import { createThread, getThread, updateThread } from "../lib/threads";
import { projectContext, readContext } from "./context";
import { requireApiKey } from "./middleware";
import { createRouter } from "./router";
import { errorResponses, failureResponse } from "./schemas/errors";
import { jsonBody, jsonResponse, security } from "./schemas/http";
import { EXAMPLES, newDatasetSchema, pathParams, text } from "./schemas/inputs";
import { ThreadSchema } from "./schemas/threads";

const tags = ["Threads"];
const base = { tags, security: security.apiKey };

const tagsSchema = z
  .array(text().min(1).max(100))
  .max(50)
  .openapi({ description: "Free-form labels (up to 50, each 1-100 characters); duplicates are dropped." });

const settingsSchema = z.object({ episodic: threadEpisodicOverride.nullish() }).nullish().openapi({
  description:
    "Episodic override for this thread (thread bounds). At creation null values (and a null `episodic` or `settings`) are ignored; in a PATCH a null value removes that key's override, so the project's setting applies again.",
});

const routes = {
  create: createRoute({
    ...base,
    method: "post",
    path: "/",
    summary: "Create a thread (a new one on every call)",
    request: jsonBody(
      z.object({ dataset: newDatasetSchema, tags: tagsSchema.optional(), settings: settingsSchema.optional() }),
      { dataset: EXAMPLES.dataset, tags: ["support"] },
    ),
    responses: {
      201: jsonResponse(ThreadSchema, "Created"),
      400: errorResponses[400],
      401: errorResponses[401],
      500: failureResponse("Failed to create thread"),
    },
  }),
  get: createRoute({
    ...base,
    method: "get",
    path: "/{id}",
    summary: "Get a thread",
    request: { params: pathParams("id", EXAMPLES.threadId) },
    responses: { 200: jsonResponse(ThreadSchema, "The thread"), 401: errorResponses[401], 404: errorResponses[404] },
  }),
  patch: createRoute({
    ...base,
    method: "patch",
    path: "/{id}",
    summary: "Update a thread's tags or episodic override",
    description: "`tags` replaces the list; `settings.episodic` is merged into the existing override.",
    request: {
      params: pathParams("id", EXAMPLES.threadId),
      ...jsonBody(z.object({ tags: tagsSchema.optional(), settings: settingsSchema.optional() }), {
        tags: ["support", "travel"],
      }),
    },
    responses: {
      200: jsonResponse(ThreadSchema, "The updated thread"),
      400: errorResponses[400],
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
  end: createRoute({
    ...base,
    method: "post",
    path: "/{id}/end",
    summary: "End a thread: triggers episode extraction",
    request: { params: pathParams("id", EXAMPLES.threadId) },
    responses: {
      200: jsonResponse(
        z.object({
          threadId: z.string(),
          dataset: z.string(),
          endedAt: z.string(),
          episodeId: z.string().nullable().openapi({
            description:
              "The episode cut from the thread's messages (pending; summarised in the background), or null when there is nothing to condense or episodic memory is disabled.",
          }),
        }),
        "Ended; extraction runs in the background",
      ),
      401: errorResponses[401],
      404: errorResponses[404],
    },
  }),
};

export const threadRoutes = createRouter();
threadRoutes.use("*", requireApiKey);

threadRoutes
  .openapi(routes.create, async (c) => c.json(await createThread(projectContext(c), c.req.valid("json")), 201))
  .openapi(routes.get, async (c) => c.json(await getThread(readContext(c), { threadId: c.req.valid("param").id }), 200))
  .openapi(routes.patch, async (c) =>
    c.json(await updateThread(projectContext(c), { threadId: c.req.valid("param").id, ...c.req.valid("json") }), 200),
  )
  .openapi(routes.end, async (c) =>
    c.json(await endThread(projectContext(c), { threadId: c.req.valid("param").id }), 200),
  );

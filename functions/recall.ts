import { createRoute, z } from "@hono/zod-openapi";
import { setMetric, timing } from "hono/timing";
import { errorFields } from "../lib/log";
import { eraseDataset, exportDataset } from "../lib/recall/dataset";
import { RECALL_FAILURE, recall } from "../lib/recall/recall";
import { projectContext, readContext } from "./context";
import { readsOnly, requireApiKey } from "./middleware";
import { createRouter } from "./router";
import { EpisodeSchema } from "./schemas/episodes";
import { errorResponses, failureResponse } from "./schemas/errors";
import { EntitySchema, FactSchema } from "./schemas/facts";
import { jsonBody, jsonResponse, security } from "./schemas/http";
import { datasetPathParam, EXAMPLES, Iso } from "./schemas/inputs";
import { RecallRequestSchema, RecallResponseSchema } from "./schemas/recall";

const base = { tags: ["Recall"], security: security.apiKey };

const ExportSchema = z
  .object({
    dataset: z.string(),
    exportedAt: Iso,
    threads: z.array(
      z.object({
        threadId: z.string(),
        tags: z.array(z.string()),
        createdAt: Iso,
        messages: z.array(z.object({ role: z.string(), content: z.string(), createdAt: Iso })),
      }),
    ),
    episodes: z.array(EpisodeSchema),
    facts: z.array(FactSchema.omit({ relevanceScore: true })),
    entities: z.array(EntitySchema),
  })
  .openapi("DatasetExport");

const datasetParam = datasetPathParam;

const routes = {
  recall: createRoute({
    ...base,
    method: "post",
    path: "/",
    summary: "What the service knows, as a prompt-ready block",
    description:
      "With a query: one embedding (cached per process for repeated queries) and one SQL statement ranking by one fused score of vector, keyword, entity and time signals (see `relevanceScore`). Without: the most recent live facts. A `Server-Timing` header reports the embedding, SQL and synthesis times.",
    middleware: [readsOnly] as const,
    request: jsonBody(RecallRequestSchema, { dataset: EXAMPLES.dataset, query: EXAMPLES.question, include: ["raw"] }),
    responses: {
      200: jsonResponse(RecallResponseSchema, "The recalled memory"),
      400: errorResponses[400],
      401: errorResponses[401],
      500: failureResponse(RECALL_FAILURE, `${RECALL_FAILURE} (nothing could be read)`),
    },
  }),
  export: createRoute({
    ...base,
    method: "get",
    path: "/datasets/{dataset}/export",
    summary: "The whole dataset, unpaginated",
    description:
      "Threads with messages, episodes, facts (live and superseded) and entities, streamed as one JSON document. An unknown dataset exports empty. If reading fails midway the body ends early and is not valid JSON.",
    request: { params: datasetParam },
    responses: {
      200: jsonResponse(ExportSchema, "The export"),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
  erase: createRoute({
    ...base,
    method: "delete",
    path: "/datasets/{dataset}",
    summary: "Hard-erase a dataset",
    description:
      "Every thread, message, episode, fact and entity of the dataset, and its pending jobs, in one transaction, with the copies of their text held elsewhere: the stored `Idempotency-Key` answers of requests that named the dataset (in the path, the body, or through the thread or episode the path names; a request still running then stores none) and the dataset's webhook deliveries with their attempts. No undo.",
    request: { params: datasetParam },
    responses: {
      200: jsonResponse(
        z.object({
          dataset: z.string(),
          deleted: z.object({
            threads: z.number().int(),
            episodes: z.number().int(),
            facts: z.number().int(),
            entities: z.number().int(),
          }),
        }),
        "Erased (all counts 0 for an unknown dataset)",
      ),
      400: errorResponses[400],
      401: errorResponses[401],
    },
  }),
};

export const recallRoutes = createRouter();
recallRoutes.use("*", requireApiKey);
recallRoutes.use("/", timing({ crossOrigin: true }));

recallRoutes
  .openapi(routes.recall, async (c) => {
    const { body, timings } = await recall(readContext(c), c.req.valid("json"));
    for (const t of timings) setMetric(c, t.name, t.ms, t.description);
    return c.json(body, 200);
  })
  .openapi(routes.export, async (c) => {
    const ctx = readContext(c);
    const chunks = await exportDataset(ctx, c.req.valid("param"));
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const next = await chunks.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value));
        } catch (err) {
          ctx.deps.log.error("export failed midway", errorFields(err));
          controller.error(err);
        }
      },
      async cancel() {
        await chunks.return(undefined);
      },
    });
    return c.body(body, 200, { "content-type": "application/json; charset=utf-8" }) as never;
  })
  .openapi(routes.erase, async (c) => c.json(await eraseDataset(projectContext(c), c.req.valid("param")), 200));

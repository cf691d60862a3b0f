import { createRoute, z } from "@hono/zod-openapi";
import { providerConfigured } from "../../lib/config";
import { operation } from "../router";
import { errorResponses } from "../schemas/errors";
import { jsonResponse, security } from "../schemas/http";

/** `/dashboard/provider`: whether a model provider is configured (the dashboard's banner). */
const base = { tags: ["Internal: dashboard"], security: security.session };

export const providerOperations = {
  status: operation(
    createRoute({
      ...base,
      method: "get",
      path: "/provider",
      summary: "Whether a model provider is configured, and the models the service uses",
      description:
        "Read from the configuration, no provider call. Without a provider (neither OPENAI_API_KEY nor OPENAI_BASE_URL set) chat, compaction and episode search answer their 500 (with a `detail` saying so) and episodes and fact extraction fail; the dashboard shows a banner.",
      responses: {
        200: jsonResponse(
          z.object({
            provider: z
              .object({
                configured: z.boolean().openapi({ description: "OPENAI_API_KEY or OPENAI_BASE_URL is set." }),
                llmModel: z.string(),
                embeddingModel: z.string(),
                embeddingDimensions: z.number().int(),
              })
              .openapi("ProviderStatus"),
          }),
          "The provider's configuration",
        ),
        401: errorResponses[401],
      },
    }),
    (c) => {
      const { config } = c.get("deps");
      const { llmModel, embeddingModel, embeddingDimensions } = config.openai;
      return c.json(
        { provider: { configured: providerConfigured(config), llmModel, embeddingModel, embeddingDimensions } },
        200,
      );
    },
  ),
};

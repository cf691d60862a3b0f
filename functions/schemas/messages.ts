import { z } from "@hono/zod-openapi";
import { INT4_MAX, numberIn } from "../../lib/numbers";
import { messageRole } from "../../lib/roles";
import { text } from "./inputs";

/**
 * Caller telemetry. Bounds keep the values storable and summable: latency is a `real` column,
 * token totals are summed by stats. Below about 1.18e-38 a value is stored as 0 (numberIn): a
 * `real` cannot hold 5e-324 or 1e-50 at all.
 */
const tokenCount = numberIn(0, Number.MAX_SAFE_INTEGER);
const latency = numberIn(0, INT4_MAX);

export const MessageSchema = z
  .object({
    messageId: z.string(),
    threadId: z.string(),
    sequenceNumber: z.number().int().openapi({ description: "Server-assigned, gapless, in insert order." }),
    role: messageRole(),
    content: z.string(),
    tokens: z
      .object({ input: z.number().optional(), output: z.number().optional(), total: z.number().optional() })
      .nullable(),
    model: z.string().nullable(),
    latencyMs: z.number().nullable(),
    metadata: z.object({ stopReason: z.string().optional(), agentName: z.string().optional() }).nullable(),
    compactedAt: z.string().nullable(),
    createdAt: z.string(),
  })
  .openapi("Message");

/** One message as the add and batch routes take it. */
export const addMessageBody = z.object({
  role: messageRole().openapi({ description: "user, assistant, system or tool." }),
  content: text().min(1).openapi({ description: "Message text, non-empty." }),
  tokens: z
    .object({ input: tokenCount.optional(), output: tokenCount.optional(), total: tokenCount.optional() })
    .optional()
    .openapi({ description: "Caller telemetry, stored as given; not computed by the service." }),
  model: text().max(200).optional().openapi({ description: "Model that produced an assistant turn." }),
  latencyMs: latency.optional().openapi({ description: "Caller-measured latency in milliseconds." }),
  metadata: z
    .object({ stopReason: text().max(200).optional(), agentName: text().max(200).optional() })
    .optional()
    .openapi({ description: "Only stopReason and agentName are kept; other keys are dropped." }),
});

import { z } from "@hono/zod-openapi";
import { integerIn, numberIn } from "../../lib/numbers";
import { messageRole } from "../../lib/roles";
import { DEFAULT_SETTINGS } from "../../lib/settings/settings";
import { EpisodeSchema } from "./episodes";
import { FactSchema } from "./facts";
import { datasetSchema, dateInput, Iso, text } from "./inputs";

/** The project defaults the descriptions quote. */
const { semantic: defaults } = DEFAULT_SETTINGS;

export const RankedFactSchema = FactSchema.extend({
  relevanceScore: z.number().openapi({
    description:
      "The fused score: cosine + keyword (BM25 over the larger of the best candidate's and that of two words no other fact holds) + entity boost + time term, each times its project setting's weight (docs/api-notes.md, Recall ranking); comparable only within one response; 1 without a query.",
  }),
}).openapi("RankedFact");

const FactGroupSchema = z
  .object({
    entityName: z.string().openapi({
      description: "The anchor entity; for a fact touching no anchor, the entity it touches, else its subject.",
    }),
    facts: z.array(
      RankedFactSchema.pick({
        subject: true,
        predicate: true,
        object: true,
        sourceQuote: true,
        validAt: true,
        validUntil: true,
        relevanceScore: true,
      }),
    ),
    groupRelevance: z
      .number()
      .openapi({ description: "The best relevanceScore in the group; groups are in its order." }),
  })
  .openapi("FactGroup");

const RecallEpisodeSchema = EpisodeSchema.pick({
  episodeId: true,
  summary: true,
  keyLearnings: true,
  startedAt: true,
  endedAt: true,
}).extend({
  relevanceScore: z.number().openapi({
    description:
      "cosineSimilarity × similarityWeight + 1/(1 + daysSince) × recencyWeight (similarity 0 without a query).",
  }),
});

const RecallMessageSchema = z
  .object({
    messageId: z.string().openapi({ description: "The message." }),
    threadId: z.string().openapi({ description: "Its thread." }),
    role: messageRole().openapi({ description: "Who wrote it." }),
    content: z.string().openapi({
      description:
        "Its text, the first 4,000 characters of a longer one (`truncated`); the block shows its first 240. The whole message is in its thread.",
    }),
    truncated: z.boolean().openapi({ description: "True when `content` is the head of a longer message." }),
    createdAt: Iso.openapi({ description: "When it was written." }),
    relevanceScore: z.number().openapi({
      description:
        "The fused score: cosine (once the message is embedded, seconds after its thread's last write) + keyword (BM25) + entity (1 when it names an entity of the facts' second hop) + time term, with the facts' weights; comparable only within one response; 1 without a query.",
    }),
  })
  .openapi("RecallMessage");

export const RecallRequestSchema = z
  .object({
    dataset: datasetSchema,
    query: text().max(2000).optional().openapi({
      description: "Up to 2000 characters; drives ranking. Omit (or send blank) for the most recent facts.",
    }),
    include: z
      .array(z.enum(["episodes", "synthesis", "raw", "messages"]))
      .default([])
      .openapi({
        description:
          "Extra parts: `raw` (facts and groups), `episodes`, `synthesis` (one model call), `messages` (the conversation's best-matching messages, also rendered into `context` after the facts).",
      }),
    limit: integerIn(1, 100)
      .optional()
      .openapi({
        description: `Facts in the block, 1-100; default the project's factsInContext (${defaults.factsInContext}).`,
      }),
    messageLimit: integerIn(1, 100)
      .optional()
      .openapi({
        description: `With \`include: ["messages"]\`: messages in the block, 1-100; default the project's messagesInContext (${defaults.messagesInContext}). Checked always, used only with messages.`,
      }),
    minConfidence: numberIn(0, 1)
      .optional()
      .openapi({
        description: `0-1; default the project's retrievalMinConfidence (${defaults.retrievalMinConfidence}). A value below about 1.18e-38 counts as 0.`,
      }),
    asOf: dateInput.optional().openapi({
      type: "string",
      description:
        "ISO datetime (without an offset: UTC) or YYYY-MM-DD (midnight UTC): only facts true at that instant (valid by then, not yet ended or invalidated), ranked as without it.",
    }),
  })
  .openapi("RecallRequest");

export const RecallResponseSchema = z
  .object({
    context: z.string().openapi({ description: "Prompt-ready block; the empty string when nothing matched." }),
    factCount: z.number().int().openapi({ description: "Facts in `context`." }),
    synthesis: z.string().nullable().openapi({
      description: "A model-written paragraph over the block; null unless included, or when context is empty.",
    }),
    facts: z.array(RankedFactSchema).nullable().openapi({ description: "The facts of the block, by relevance (raw)." }),
    groups: z.array(FactGroupSchema).nullable().openapi({ description: "The same facts by anchor entity (raw)." }),
    episodes: z
      .object({
        episodes: z.array(RecallEpisodeSchema).openapi({ description: "The top contextEpisodes completed episodes." }),
        episodeCount: z
          .number()
          .int()
          .openapi({ description: "Completed episodes of the dataset (at asOf, if given)." }),
      })
      .nullable()
      .openapi({ description: "Null unless included (or if they could not be read); never rendered into context." }),
    messages: z.array(RecallMessageSchema).nullable().openapi({
      description:
        "Null unless `include` has `messages`: the dataset's indexed messages (the user's; the assistant's where the project indexes them) that best match the query, best first, without those a returned fact quotes or that repeat the text of one before them; the most recent without a query; created at or before `asOf` when given. Rendered into `context` under their own heading.",
    }),
  })
  .openapi("RecallResponse");

import { z } from "@hono/zod-openapi";
import { Iso } from "./inputs";

export const FactSchema = z
  .object({
    factId: z.string().openapi({ description: "Fact id (`fct_…`)." }),
    subject: z.string().openapi({ description: "Who or what the fact is about (usually the user)." }),
    predicate: z.string().openapi({ description: "The relation, e.g. `works_at`." }),
    object: z.string().openapi({ description: "The value or the other entity." }),
    objectIsEntity: z.boolean().openapi({ description: "Whether `object` names an entity of the dataset." }),
    confidence: z
      .number()
      .min(0)
      .max(1)
      .openapi({ description: "The extraction model's self-rating (0-1): a coarse filter, not a probability." }),
    sourceQuote: z.string().openapi({ description: "The user's verbatim words that produced the fact." }),
    validAt: Iso.openapi({ description: "Start of validity." }),
    validUntil: Iso.nullable().openapi({ description: "End of validity in the world, when known; null if open." }),
    invalidAt: Iso.nullable().openapi({
      description: "When the service stopped believing the fact (superseded or deleted); null while live.",
    }),
    episodeId: z
      .string()
      .nullable()
      .openapi({ description: "The episode the fact was extracted from (null if it has none)." }),
    relevanceScore: z.number().openapi({ description: "Always 1 in these unranked lists (ranked only by recall)." }),
  })
  .openapi("Fact");

export const EntitySchema = z
  .object({
    name: z.string().openapi({ description: "Entity name as first extracted." }),
    type: z.string().openapi({ description: "Entity type, such as PERSON, ORG, PLACE or PRODUCT." }),
  })
  .openapi("Entity");

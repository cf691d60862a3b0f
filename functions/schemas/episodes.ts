import { z } from "@hono/zod-openapi";

const count = (description: string) => z.number().int().min(0).openapi({ description });

export const ExtractionReportSchema = z
  .object({
    proposed: count("Facts the extraction model proposed for the episode."),
    kept: count("Facts written. proposed = kept + the sum of dropped."),
    dropped: z
      .object({
        notAboutUser: count(
          'Subject not the user. "user", "the user", "I", "me", "myself" and the names the user gave count as the user (stored as "user").',
        ),
        quoteNotFound: count("sourceQuote empty or not found in any of the user's messages of the episode."),
        emptyPart: count("Subject, predicate or object blank."),
        duplicate: count(
          "The same fact twice in the answer, or a fact at or above factDedupThreshold of a live fact or of an earlier one of the answer.",
        ),
        lowConfidence: count(
          "Under a confidence floor at write time. None applies today (always 0): a fact under retrievalMinConfidence is stored, left out of recall and never ends an older fact.",
        ),
      })
      .openapi({
        description: "Proposed facts not written, by reason (each counted once, under the first that applies).",
      }),
    invalidated: count("Live facts ended because a kept fact contradicts them (not part of proposed)."),
  })
  .openapi("ExtractionReport", {
    description:
      "What one fact extraction did with the facts the model proposed: each one is kept or dropped for exactly one reason.",
  });

export const EpisodeSchema = z
  .object({
    episodeId: z.string(),
    threadId: z.string(),
    dataset: z.string(),
    projectId: z.string(),
    status: z.enum(["pending", "processing", "completed", "failed", "archived", "deleted"]),
    summary: z.string(),
    keyLearnings: z.array(z.string()),
    messageCount: z.number().int(),
    tokenCount: z.number().int().nullable(),
    startedAt: z.string().nullable(),
    endedAt: z.string().nullable(),
    processingStartedAt: z.string().nullable(),
    processingCompletedAt: z.string().nullable(),
    error: z.string().nullable().openapi({ description: "Why summarisation failed (status failed)." }),
    retryCount: z.number().int(),
    metadata: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({ description: "`{trigger: 'end' | 'idle' | 'sibling'}`: what cut the episode." }),
    extractionReport: z.union([ExtractionReportSchema, z.null()]).openapi({
      description:
        "What fact extraction did with the episode: facts proposed, kept and dropped by reason. Null until an extraction completes (and for episodes extracted before the report existed).",
    }),
    createdAt: z.string().nullable(),
    updatedAt: z.string().nullable(),
    waitingFor: z.enum(["budget"]).optional().openapi({
      description:
        "Present only while a pending episode waits, saying why: `budget` while the project's monthly token budget is spent (it resumes by itself when the month ends or the budget is raised). In the episode views (get, list, the dashboard), not in the export.",
    }),
  })
  .openapi("Episode");

import { z } from "zod";

/**
 * What one fact extraction did with the facts the model proposed, as the episodes row stores it
 * (`extraction_report`): every proposed fact is either kept (written) or dropped for exactly one
 * counted reason, so `proposed = kept + sum(dropped)`. The semantic folder makes it
 * (lib/semantic/report.ts), the episodic folder shows it with the episode: both read it from here,
 * so neither imports the other.
 */
export const DROP_REASONS = ["notAboutUser", "quoteNotFound", "emptyPart", "duplicate", "lowConfidence"] as const;
export type DropReason = (typeof DROP_REASONS)[number];

export interface ExtractionReport {
  proposed: number;
  kept: number;
  dropped: Record<DropReason, number>;
  /** Live facts this extraction ended because a kept fact contradicts them (not a drop). */
  invalidated: number;
}

/** A stored extraction report (episodes.extraction_report). */
export const ExtractionReportRow = z.object({
  proposed: z.number(),
  kept: z.number(),
  dropped: z.object({
    notAboutUser: z.number(),
    quoteNotFound: z.number(),
    emptyPart: z.number(),
    duplicate: z.number(),
    lowConfidence: z.number(),
  }),
  invalidated: z.number(),
}) satisfies z.ZodType<ExtractionReport>;

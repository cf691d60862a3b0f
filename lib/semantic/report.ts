/**
 * What one extraction did with the facts the model proposed: every proposed fact is either kept
 * (written) or dropped for exactly one counted reason, so `proposed = kept + sum(dropped)`.
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

/** The report of `proposed` facts of which the ones in `drops` were dropped, the rest kept. */
export function tallyReport(proposed: number, drops: readonly DropReason[], invalidated = 0): ExtractionReport {
  const dropped = Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<DropReason, number>;
  for (const reason of drops) dropped[reason] += 1;
  return { proposed, kept: proposed - drops.length, dropped, invalidated };
}

/** The report as log fields: one flat line per extracted episode. */
export function reportFields(report: ExtractionReport): Record<string, number> {
  return { proposed: report.proposed, kept: report.kept, ...report.dropped, invalidated: report.invalidated };
}

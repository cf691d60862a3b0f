import { DROP_REASONS, type DropReason, type ExtractionReport } from "../db/extraction-report";

// The report's shape is stored on the episode, so it is declared with the schema (lib/db).
export { DROP_REASONS, type DropReason, type ExtractionReport };

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

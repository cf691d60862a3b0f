import type { components } from "../api/schema";

export type ExtractionReport = components["schemas"]["ExtractionReport"];

/** The drop reasons in the order the service checks them, as words. */
const REASONS: [keyof ExtractionReport["dropped"], string][] = [
  ["emptyPart", "empty part"],
  ["notAboutUser", "not about the user"],
  ["quoteNotFound", "quote not found"],
  ["duplicate", "duplicate"],
  ["lowConfidence", "low confidence"],
];

/**
 * An extraction report as short phrases: "3 of 5 kept", then each reason that dropped a fact
 * ("2 not about the user"), then the older facts it ended. Reasons that dropped nothing are left
 * out, so a clean extraction reads as one phrase.
 */
export function describeExtraction(r: ExtractionReport): { kept: string; dropped: string[]; ended: string | null } {
  return {
    kept: `${r.kept} of ${r.proposed} kept`,
    dropped: REASONS.filter(([key]) => r.dropped[key] > 0).map(([key, words]) => `${r.dropped[key]} ${words}`),
    ended: r.invalidated > 0 ? `ended ${r.invalidated} older fact${r.invalidated === 1 ? "" : "s"}` : null,
  };
}

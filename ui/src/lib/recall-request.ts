import type { components } from "../api/schema";

export type RecallRequest = components["schemas"]["RecallRequest"];

/**
 * The recall request a playground link stands for: null before the first run (no dataset), or
 * what in the link cannot be sent. A number that is not one (`limit=abc`) is said here: JSON has
 * no NaN, so it would reach the server as null and come back as "expected number, received null".
 */
export function recallRequestOf(query: URLSearchParams): { request: RecallRequest } | { invalid: string } | null {
  const dataset = query.get("dataset");
  if (!dataset) return null;
  const include: RecallRequest["include"] = [];
  if (query.get("episodes") === "1") include.push("episodes");
  if (query.get("synthesis") === "1") include.push("synthesis");
  if (query.get("messages") === "1") include.push("messages");
  const numbers: Record<"limit" | "minConfidence", number | undefined> = { limit: undefined, minConfidence: undefined };
  for (const key of ["limit", "minConfidence"] as const) {
    const raw = query.get(key)?.trim();
    if (!raw) continue;
    const n = Number(raw);
    if (!Number.isFinite(n))
      return { invalid: `${key} in the link is not a number: “${raw}”. Enter one and run again.` };
    numbers[key] = n;
  }
  return {
    request: {
      dataset,
      query: query.get("q") || undefined,
      include,
      limit: numbers.limit,
      minConfidence: numbers.minConfidence,
      asOf: query.get("asOf") || undefined,
    },
  };
}

import { z } from "@hono/zod-openapi";
import { datasetName, dateInput as dateInputOf, newDatasetName, text } from "../../lib/inputs";
import { integerIn } from "../../lib/numbers";

export { text };

// --- Query-string coercion: numbers from digits, booleans from true/false/1/0, dates ------------

const digits = (v: unknown) => (typeof v === "string" && /^-?\d+$/.test(v.trim()) ? Number(v) : v);

/**
 * An integer parameter (min..max within the 32-bit range, lib/numbers.ts). Only digits are
 * coerced: "1.5", "1e3", "NaN", "Infinity" or "1e309" stay strings and fail as the wrong type
 * (a 400 naming the parameter); a digit string beyond the bounds fails them.
 */
export const intQuery = (min: number, max: number, fallback?: number) => {
  const base = z.preprocess(digits, integerIn(min, max));
  return (fallback === undefined ? base.optional() : base.default(fallback)) as z.ZodType<number>;
};

export const boolQuery = z.preprocess(
  (v) => (v === "true" || v === "1" ? true : v === "false" || v === "0" ? false : v),
  z.boolean(),
);

/** ISO datetime (without an offset: UTC) or YYYY-MM-DD, as a Date in years 0001-9999 (lib/inputs.ts). */
export const dateInput = dateInputOf();

export const Iso = z.string().openapi({ format: "date-time" });

export const pageQuery = {
  limit: intQuery(1, 100, 20).openapi({ description: "Page size (1-100)." }),
  offset: intQuery(0, 1_000_000, 0).openapi({ description: "Rows to skip." }),
};

/** Dataset names: any 1-256 characters (except NUL), percent-encoded in paths. */
export const datasetSchema = datasetName().openapi({
  description: "Caller-chosen dataset name (1-256 characters); created implicitly by its first write.",
});

/** The dataset a write creates (a new thread): also not "." or "..", which no URL path can carry. */
export const newDatasetSchema = newDatasetName().openapi({
  description: 'Caller-chosen dataset name (1-256 characters, not "." or ".."); created implicitly by its first write.',
});

/**
 * Realistic values for the API reference's examples (what its "Test request" and copied curl
 * send): a dataset named like an end user, ids of the right shape, a question a user asks.
 */
export const EXAMPLES = {
  dataset: "user-42",
  threadId: "thr_4k2j9x7q1m8w3e5r0t6y",
  episodeId: "epi_8d3f1k9x2m7q4w0e5r6t",
  factId: "fct_2m9q4x7k1d8w3e5r0t6y",
  entity: "Lisbon",
  question: "Where does the user live now?",
} as const;

/** A non-empty path parameter, e.g. `pathParams("id")` for `/{id}`, with its example if it has one. */
export const pathParams = <N extends string>(name: N, example?: string) =>
  z.object({
    [name]: z
      .string()
      .min(1)
      .openapi({ param: { name, in: "path", ...(example === undefined ? {} : { example }) } }),
  } as Record<N, z.ZodString>);

/** The `{dataset}` path parameter of the /v1 routes. */
export const datasetPathParam = z.object({
  dataset: datasetSchema.openapi({ param: { name: "dataset", in: "path", example: EXAMPLES.dataset } }),
});

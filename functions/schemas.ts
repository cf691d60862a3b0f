import { z } from "@hono/zod-openapi";
import { integerIn } from "../lib/numbers";

export const ErrorSchema = z
  .object({ error: z.string().openapi({ description: "What went wrong. Not stable: branch on the HTTP status." }) })
  .openapi("Error");

export const ValidationErrorSchema = z
  .object({
    error: z.literal("Validation error"),
    issues: z
      .array(
        z
          .object({
            code: z.string(),
            path: z.array(z.union([z.string(), z.number()])),
            message: z.string(),
          })
          .passthrough(),
      )
      .openapi({ description: "zod issues: code, path naming the field, message and code-specific details." }),
  })
  .openapi("ValidationError");

const json = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { "application/json": { schema } },
  description,
});

export const errorResponses = {
  400: json(ValidationErrorSchema, "Validation failed"),
  401: json(ErrorSchema, "Missing, invalid or revoked credential"),
  404: json(ErrorSchema, "Not found, or not in the caller's project"),
} as const;

export const jsonResponse = json;

/** A required JSON body (otherwise a missing content type would skip validation). */
export const jsonBody = <T extends z.ZodType>(schema: T, description = "JSON body") => ({
  body: { content: { "application/json": { schema } }, required: true, description },
});

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

/**
 * ISO datetime (with offset) or a plain YYYY-MM-DD date, as a Date. The instant must fall in years
 * 0001-9999 (UTC): Postgres has no year 0 and an offset can push 0001 or 9999 past the edge, which
 * would fail the statement with a 500.
 */
export const dateInput = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()])
  .transform((v) => new Date(v.length === 10 ? `${v}T00:00:00.000Z` : v))
  .refine((d) => d.getUTCFullYear() >= 1 && d.getUTCFullYear() <= 9999, "Date must be within years 0001-9999 (UTC)");

export const Iso = z.string().openapi({ format: "date-time" });

export const pageQuery = {
  limit: intQuery(1, 100, 20).openapi({ description: "Page size (1-100)." }),
  offset: intQuery(0, 1_000_000, 0).openapi({ description: "Rows to skip." }),
};

/** An unpaired UTF-16 surrogate (JSON bodies can carry one as a `\udXXX` escape). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A string the database can store. Postgres `text` and `jsonb` cannot hold U+0000, so a NUL would
 * otherwise fail the statement with a 500; here it is a 400 naming the field. Lone surrogates become
 * U+FFFD, which is what UTF-8 encoding does to them in a `text` column anyway; in `jsonb` (tags,
 * metadata) Postgres would reject the escape with a 500.
 */
export const text = () =>
  z
    .string()
    .overwrite((s) => s.replace(LONE_SURROGATE, "\ufffd"))
    .refine((s) => !s.includes("\u0000"), "Must not contain NUL characters (\\u0000)");

/** Dataset names: any 1-256 characters (except NUL), percent-encoded in paths. */
export const datasetSchema = text().min(1).max(256).openapi({
  description: "Caller-chosen dataset name (1-256 characters); created implicitly by its first write.",
});

export const security = {
  apiKey: [{ apiKey: [] }],
  session: [{ session: [] }],
};

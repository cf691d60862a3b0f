import { z } from "zod";

/*
 * The tools' argument schemas, with the bounds the matching /v1 routes enforce. These mirror
 * `text()`, `datasetSchema` and `dateInput` of functions/schemas.ts, which are built on
 * @hono/zod-openapi's `z` and so cannot be imported into lib/.
 */

/** An unpaired UTF-16 surrogate (JSON can carry one as a `\udXXX` escape). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A string Postgres can store: no NUL (a validation issue naming the field), lone surrogates as U+FFFD. */
export const text = () =>
  z
    .string()
    .overwrite((s) => s.replace(LONE_SURROGATE, "\ufffd"))
    .refine((s) => !s.includes("\u0000"), "Must not contain NUL characters (\\u0000)");

export const dataset = () =>
  text()
    .min(1)
    .max(256)
    .describe(
      "The memory space (1-256 characters), e.g. one per end user such as `user-42`. Created by its first write; use the same value for every call about the same person.",
    );

/** ISO datetime (with offset) or YYYY-MM-DD, as a Date within years 0001-9999 (UTC). */
export const dateInput = () =>
  z
    .union([z.iso.datetime({ offset: true }), z.iso.date()])
    .transform((v) => new Date(v.length === 10 ? `${v}T00:00:00.000Z` : v))
    .refine((d) => d.getUTCFullYear() >= 1 && d.getUTCFullYear() <= 9999, "Date must be within years 0001-9999 (UTC)");

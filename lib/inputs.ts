import { z } from "zod";

/*
 * Input schemas shared by the HTTP routes (functions/schemas/inputs.ts adds their OpenAPI
 * descriptions with `.openapi()`) and the MCP tools (lib/mcp/inputs.ts adds `.describe()`), so a
 * bound is written once.
 */

/** An unpaired UTF-16 surrogate (JSON bodies can carry one as a `\udXXX` escape). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Whether Postgres `text` and `jsonb` can hold `s` as it is: no NUL, no unpaired surrogate. */
export const storable = (s: string) => !s.includes("\u0000") && s.search(LONE_SURROGATE) === -1;

/** Client text as `text()` stores it: lone surrogates as U+FFFD (a NUL is refused there). */
export const withoutLoneSurrogates = (s: string) => s.replace(LONE_SURROGATE, "\ufffd");

/**
 * A model's text as Postgres `text` and `jsonb` can hold it: without NUL characters, and with
 * lone surrogates (a JSON escape like `\ud800` in its answer) as U+FFFD. Either would fail the
 * statement storing a reply, summary or fact, and every retry alike. (Client input with a NUL is
 * refused instead: `text()` below.)
 */
export function storableModelText(s: string): string {
  return storable(s) ? s : withoutLoneSurrogates(s.replaceAll("\u0000", ""));
}

/**
 * A string the database can store. Postgres `text` and `jsonb` cannot hold U+0000, so a NUL would
 * otherwise fail the statement with a 500; here it is a 400 naming the field. Lone surrogates become
 * U+FFFD, which is what UTF-8 encoding does to them in a `text` column anyway; in `jsonb` (tags,
 * metadata) Postgres would reject the escape with a 500.
 */
export const text = () =>
  z
    .string()
    .overwrite(withoutLoneSurrogates)
    .refine((s) => !s.includes("\u0000"), "Must not contain NUL characters (\\u0000)");

/** Every password the service sets: the dashboard's forms, its API and the admin command line. */
export const PASSWORD_LENGTH = { min: 6, max: 200 } as const;

/**
 * A password as every one of them checks it (zod counts characters, not UTF-16 units: "😀" is 1).
 * No lone surrogate: hashed as UTF-8 it would become U+FFFD, so any other lone one would match.
 */
export const passwordInput = () =>
  z
    .string()
    .min(PASSWORD_LENGTH.min)
    .max(PASSWORD_LENGTH.max)
    .refine((s) => s.search(LONE_SURROGATE) === -1, "Must not contain unpaired UTF-16 surrogates");

/** Dataset names: any 1-256 characters (except NUL). */
export const datasetName = () => text().min(1).max(256);

/**
 * The name of a dataset a write creates: not "." or "..". A URL cannot carry either as a path
 * segment, even percent-encoded (URL parsers resolve `%2E%2E` as a dot segment), so such a
 * dataset could be written but never read, exported or erased by its routes. Reads still take
 * them, for data written before.
 */
export const newDatasetName = () =>
  datasetName().refine((s) => s !== "." && s !== "..", {
    message: 'Must not be "." or "..": a URL path cannot name them, so the dataset could not be read or erased',
  });

/**
 * Whether a `timestamptz` column can take `d` as the service writes it (an ISO string): a valid
 * instant in years 0001-9999 (UTC). Postgres has no year 0, and an ISO string past 9999 carries a
 * six-digit year it reads as an offset, so either would fail the statement storing it.
 */
export const storableInstant = (d: Date) =>
  !Number.isNaN(d.getTime()) && d.getUTCFullYear() >= 1 && d.getUTCFullYear() <= 9999;

/** An ISO datetime that names its offset (`Z` or `±hh:mm`); without one, JavaScript reads local time. */
const NAMES_OFFSET = /(?:Z|[+-]\d{2}:?\d{2})$/i;

/**
 * The instant an accepted date text names: a plain date is its UTC midnight, and a datetime
 * without an offset is UTC too (the spec takes any ISO datetime; reading it in the server's own
 * time zone would make the same request mean another instant on another host).
 */
export function instantOf(text: string): Date {
  if (text.length === 10) return new Date(`${text}T00:00:00.000Z`);
  return new Date(NAMES_OFFSET.test(text) ? text : `${text}Z`);
}

/**
 * ISO datetime (with an offset, or without one: UTC) or a plain YYYY-MM-DD date, as a Date. The
 * instant must fall in years 0001-9999 (UTC, `storableInstant`): an offset can push 0001 or 9999
 * past the edge, which would fail the statement with a 500.
 */
export const dateInput = () =>
  z
    .union([z.iso.datetime({ offset: true, local: true }), z.iso.date()])
    .transform(instantOf)
    .refine(storableInstant, "Date must be within years 0001-9999 (UTC)");

import { type SQL, sql } from "drizzle-orm";

/**
 * The time a query names, as a half-open UTC interval [from, to): "in May 2023", "2023",
 * "May 5, 2023", "2023-05-05", "last week", "yesterday", "last summer", "3 months ago",
 * "before 2022", "since March". Recall boosts facts valid in it (the time term of the score).
 * Relative expressions are read against `now` (the request's asOf, else the clock). Only what
 * a user plainly writes; anything else is no time (null), never a guess.
 */
export interface TimeRange {
  from: Date;
  to: Date;
}

const MONTHS = [
  "january",
  "february",
  "march",
  "april",
  "may",
  "june",
  "july",
  "august",
  "september",
  "october",
  "november",
  "december",
];
const MONTH_ALT =
  "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?";
const SEASONS: Record<string, number> = { spring: 2, summer: 5, autumn: 8, fall: 8, winter: 11 };
const NUMBERS: Record<string, number> = {
  a: 1,
  an: 1,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  few: 3,
  couple: 2,
};
const DAY_MS = 86_400_000;
/** The earliest and latest instants recall compares validAt with ("before 2022", "since May"). */
const BEGINNING = new Date("0001-01-01T00:00:00.000Z");
const END = new Date(Date.UTC(9999, 11, 31));
/** The last instant a range may reach: its ISO form past it (`+010000-…`) is no timestamp to the database. */
const LAST = new Date("9999-12-31T23:59:59.999Z");

/** Midnight UTC of a day; a month or day past its end rolls over. Years 0-99 are those years, not 19xx (Date.UTC). */
const utc = (y: number, m: number, d = 1) => {
  const date = new Date(0);
  date.setUTCFullYear(y, m, d);
  return date;
};
const monthIndex = (name: string) => MONTHS.findIndex((m) => m.startsWith(name.slice(0, 3)));
const addDays = (d: Date, n: number) => new Date(d.getTime() + n * DAY_MS);
const startOfDay = (d: Date) => utc(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
/** Monday 00:00 UTC of the week holding `d`. */
const startOfWeek = (d: Date) => addDays(startOfDay(d), -((d.getUTCDay() + 6) % 7));
const month = (y: number, m: number): TimeRange => ({ from: utc(y, m), to: utc(y, m + 1) });
const year = (y: number): TimeRange => ({ from: utc(y, 0), to: utc(y + 1, 0) });
const plausibleYear = (y: number) => y >= 1900 && y <= 2200;

/** The most recent month called `m` that has begun by `now` (this May, or last year's). */
function latestMonth(m: number, now: Date): TimeRange {
  const y = m <= now.getUTCMonth() ? now.getUTCFullYear() : now.getUTCFullYear() - 1;
  return month(y, m);
}

/** A season of three months starting at month `m` (winter runs into the next year). */
function season(m: number, y: number): TimeRange {
  return { from: utc(y, m), to: utc(y, m + 3) };
}

type Rule = [RegExp, (m: RegExpMatchArray, now: Date) => TimeRange | null];

/** Tried in order; the first match wins, so the most specific forms come first. */
const RULES: Rule[] = [
  [/\b(\d{4})-(\d{2})-(\d{2})\b/, (m) => day(Number(m[1]), Number(m[2]) - 1, Number(m[3]))],
  [
    new RegExp(`\\b(${MONTH_ALT})\\.? (\\d{1,2})(?:st|nd|rd|th)?,? (\\d{4})\\b`),
    (m) => day(Number(m[3]), monthIndex(m[1] ?? ""), Number(m[2])),
  ],
  [
    new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)? (?:of )?(${MONTH_ALT})\\.?,? (\\d{4})\\b`),
    (m) => day(Number(m[3]), monthIndex(m[2] ?? ""), Number(m[1])),
  ],
  [
    new RegExp(`\\b(${MONTH_ALT})\\.?,? (?:of )?(\\d{4})\\b`),
    (m) => (plausibleYear(Number(m[2])) ? month(Number(m[2]), monthIndex(m[1] ?? "")) : null),
  ],
  [
    /\b(spring|summer|autumn|fall|winter)(?: of)? (\d{4})\b/,
    (m) => (plausibleYear(Number(m[2])) ? season(SEASONS[m[1] ?? ""] ?? 0, Number(m[2])) : null),
  ],
  [/\b(before|until|prior to) (\d{4})\b/, (m) => bounded(null, Number(m[2]))],
  [/\b(after|since) (\d{4})\b/, (m) => bounded(Number(m[2]) + (m[1] === "after" ? 1 : 0), null)],
  [/\b(?:in|during|of|from|around|by) (\d{4})\b/, (m) => yearRange(Number(m[1]))],
  [/\byesterday\b/, (_, now) => ({ from: addDays(startOfDay(now), -1), to: startOfDay(now) })],
  [/\btoday\b|\bthis morning\b|\btonight\b/, (_, now) => ({ from: startOfDay(now), to: addDays(startOfDay(now), 1) })],
  [/\blast week\b/, (_, now) => ({ from: addDays(startOfWeek(now), -7), to: startOfWeek(now) })],
  [/\bthis week\b/, (_, now) => ({ from: startOfWeek(now), to: addDays(startOfWeek(now), 7) })],
  [/\blast month\b/, (_, now) => month(now.getUTCFullYear(), now.getUTCMonth() - 1)],
  [/\bthis month\b/, (_, now) => month(now.getUTCFullYear(), now.getUTCMonth())],
  [/\blast year\b/, (_, now) => year(now.getUTCFullYear() - 1)],
  [/\bthis year\b/, (_, now) => year(now.getUTCFullYear())],
  [
    /\blast (spring|summer|autumn|fall|winter)\b/,
    (m, now) => {
      const start = SEASONS[m[1] ?? ""] ?? 0;
      const y = now.getUTCFullYear();
      const thisYears = season(start, y);
      return thisYears.to <= now ? thisYears : season(start, y - 1);
    },
  ],
  [
    /\b(a|an|one|two|three|four|five|six|few|couple|\d{1,2}) (?:of )?(day|week|month|year)s? ago\b/,
    (m, now) => ago(NUMBERS[m[1] ?? ""] ?? Number(m[1]), m[2] ?? "day", now),
  ],
  [
    new RegExp(`\\b(?:in|during|since|last|this) (${MONTH_ALT})\\b`),
    (m, now) => latestMonth(monthIndex(m[1] ?? ""), now),
  ],
];

function day(y: number, m: number, d: number): TimeRange | null {
  if (!plausibleYear(y) || m < 0 || d < 1 || d > 31) return null;
  const from = utc(y, m, d);
  if (from.getUTCMonth() !== m) return null;
  return { from, to: addDays(from, 1) };
}

function yearRange(y: number): TimeRange | null {
  return plausibleYear(y) ? year(y) : null;
}

function bounded(fromYear: number | null, toYear: number | null): TimeRange | null {
  const y = fromYear ?? toYear ?? 0;
  if (!plausibleYear(y)) return null;
  return { from: fromYear === null ? BEGINNING : utc(fromYear, 0), to: toYear === null ? END : utc(toYear, 0) };
}

/** The range's bounds as SQL timestamps. */
export const timeBoundsSql = (time: TimeRange) => ({
  from: sql`${time.from.toISOString()}::timestamptz`,
  to: sql`${time.to.toISOString()}::timestamptz`,
});

/** `column` (a timestamp) lies in the range: from inclusive, to exclusive. */
export function inTimeRangeSql(column: SQL, time: TimeRange): SQL {
  const { from, to } = timeBoundsSql(time);
  return sql`${column} >= ${from} AND ${column} < ${to}`;
}

/** "3 weeks ago": that unit of time, counted back from now (a week ago: the 7 days around it). */
function ago(n: number, unit: string, now: Date): TimeRange | null {
  if (!Number.isFinite(n) || n < 1 || n > 99) return null;
  if (unit === "year") return year(now.getUTCFullYear() - n);
  if (unit === "month") return month(now.getUTCFullYear(), now.getUTCMonth() - n);
  const days = unit === "week" ? 7 * n : n;
  const at = addDays(startOfDay(now), -days);
  const half = unit === "week" ? 3 : 0;
  return { from: addDays(at, -half), to: addDays(at, half + 1) };
}

export function timeRangeOf(query: string | undefined, now: Date): TimeRange | null {
  if (!query) return null;
  const text = query.toLowerCase().replace(/\s+/gu, " ");
  for (const [pattern, read] of RULES) {
    const match = text.match(pattern);
    if (!match) continue;
    const range = read(match, now);
    if (range) return withinTimestamps(range);
  }
  return null;
}

/**
 * The range cut to the instants a timestamp holds (years 0001-9999), or null when nothing of it is
 * left: a relative time read against an asOf at either end ("today" on 9999-12-31, "2 years ago"
 * in 0001) reached past them, and the database refused the bounds (recall answered 500).
 */
function withinTimestamps(range: TimeRange): TimeRange | null {
  const from = range.from < BEGINNING ? BEGINNING : range.from;
  const to = range.to > LAST ? LAST : range.to;
  return from < to ? { from, to } : null;
}

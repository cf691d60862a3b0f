/**
 * Postgres's text form of a timestamp (`2026-11-30 12:00:00.123456+00`, `0001-01-01 00:00:00+00`,
 * `...+05:30`, `... BC`). Drizzle and the HTTP driver hand it over as text, and `new Date(text)`
 * reads this form with the legacy parser, which takes years 0-49 for 2000-2049 and 50-99 for
 * 1950-1999: a message written in 0001 came back from 2001. An ISO form (`T`, `Z`) is read too.
 */
const PG_TIMESTAMP =
  /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:(Z)|([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?$/;

/** The instant a timestamp's text names; text of another form goes to `new Date` as before. */
export function parsePgTimestamp(text: string): Date {
  const m = PG_TIMESTAMP.exec(text);
  if (!m) return new Date(text);
  const [, y, mo, d, h, mi, s, fraction, , sign, oh, om, os, bc] = m;
  // Milliseconds from the first three digits: Date holds no more, and truncating is what V8 does.
  const ms = fraction ? Number(`${fraction}00`.slice(0, 3)) : 0;
  const date = new Date(Date.UTC(2000, 0, 1, Number(h), Number(mi), Number(s), ms));
  // setUTCFullYear takes the year as it is (Date.UTC would read 0-99 as 1900-1999); 1 BC is year 0.
  date.setUTCFullYear(bc ? 1 - Number(y) : Number(y), Number(mo) - 1, Number(d));
  const offsetSeconds = sign
    ? (sign === "-" ? -1 : 1) * (Number(oh) * 3600 + Number(om ?? 0) * 60 + Number(os ?? 0))
    : 0;
  return new Date(date.getTime() - offsetSeconds * 1000);
}

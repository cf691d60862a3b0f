import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { dueJobsFromJson, dueJobsJson, type ScheduleMode, scheduleJobsSql } from "./schedule";

const dialect = new PgDialect();
const render = (mode: ScheduleMode, payload?: { pulled: true }) =>
  dialect.sqlToQuery(
    scheduleJobsSql({
      kind: "thread-idle",
      row: sql`th`,
      runAt: sql`${"2026-01-01T00:00:00.000Z"}::timestamptz`,
      from: sql`FROM th`,
      now: "2026-01-01T00:00:00.000Z",
      mode,
      payload,
    }),
  );
const flat = (text: string) => text.replace(/\s+/g, " ").trim();

describe("scheduleJobsSql", () => {
  it("writes one job row per source row: the kind's key and subject, a random id, due at runAt", () => {
    const { sql: text, params } = render("keep");
    expect(flat(text)).toMatch(
      /^INSERT INTO "jobs" \(id, kind, key, project_id, dataset, run_at, payload, created_at, updated_at\) SELECT 'job_' \|\| replace\(gen_random_uuid\(\)::text, '-', ''\), \$1, 'idle:' \|\| th\.id, th\.project_id, th\.dataset, \$2::timestamptz, jsonb_build_object\('threadId', th\.id\), \$3::timestamptz, \$4::timestamptz FROM th ON CONFLICT \(key\) DO NOTHING RETURNING key, run_at$/,
    );
    expect(params).toEqual(["thread-idle", ...Array(3).fill("2026-01-01T00:00:00.000Z")]);
  });

  it("adds payload fields beside the subject", () => {
    const { sql: text, params } = render("earlierOrTakeOver", { pulled: true });
    expect(flat(text)).toContain("jsonb_build_object('threadId', th.id) || $3::jsonb");
    expect(params[2]).toBe('{"pulled":true}');
  });

  it.each([
    ["keep", "DO NOTHING"],
    ["reschedule", "DO UPDATE SET run_at = EXCLUDED.run_at, locked_until = NULL, updated_at = EXCLUDED.updated_at"],
    [
      "replace",
      "DO UPDATE SET run_at = EXCLUDED.run_at, payload = EXCLUDED.payload, locked_until = NULL, attempts = 0, last_error = NULL, updated_at = EXCLUDED.updated_at",
    ],
    [
      "takeOver",
      'DO UPDATE SET run_at = EXCLUDED.run_at, payload = EXCLUDED.payload, locked_until = NULL, updated_at = EXCLUDED.updated_at WHERE "jobs".locked_until >= EXCLUDED.updated_at',
    ],
    [
      "earlierOrTakeOver",
      'DO UPDATE SET run_at = CASE WHEN "jobs".locked_until >= EXCLUDED.updated_at THEN EXCLUDED.run_at ELSE LEAST("jobs".run_at, EXCLUDED.run_at) END, payload = "jobs".payload || EXCLUDED.payload, locked_until = CASE WHEN "jobs".locked_until >= EXCLUDED.updated_at THEN NULL ELSE "jobs".locked_until END, updated_at = EXCLUDED.updated_at',
    ],
  ] as const)("on a waiting job of the same key, %s: %s", (mode, clause) => {
    expect(flat(render(mode).sql)).toContain(`ON CONFLICT (key) ${clause} RETURNING`);
  });
});

describe("due jobs", () => {
  it("come back from a statement as JSON (a string over Neon's HTTP driver), none as an empty list", () => {
    const due = [{ key: "idle:thr_1", runAt: "2026-01-01T00:00:05.000Z" }];
    const expected = [{ key: "idle:thr_1", runAt: new Date("2026-01-01T00:00:05.000Z") }];
    expect(dueJobsFromJson(due)).toEqual(expected);
    expect(dueJobsFromJson(JSON.stringify(due))).toEqual(expected);
    expect(dueJobsFromJson(null)).toEqual([]);
    expect(dueJobsFromJson(undefined)).toEqual([]);
    expect(flat(dialect.sqlToQuery(dueJobsJson("timer")).sql)).toBe(
      `(SELECT coalesce(json_agg(json_build_object('key', key, 'runAt', run_at)), '[]'::json) FROM "timer")`,
    );
  });
});

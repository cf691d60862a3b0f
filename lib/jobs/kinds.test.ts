import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { isJobKind, JOB_KINDS, type JobKind, jobKey, jobKeySql, jobSubject } from "./kinds";

const dialect = new PgDialect();
const kinds = Object.keys(JOB_KINDS) as JobKind[];

describe("job kinds", () => {
  it("key a job as <prefix>:<subject>, the same in JS and in SQL", () => {
    for (const kind of kinds) {
      const { prefix } = JOB_KINDS[kind];
      expect(jobKey(kind, "sub_1")).toBe(`${prefix}:sub_1`);
      expect(dialect.sqlToQuery(jobKeySql(kind, sql`${"sub_1"}`))).toMatchObject({
        sql: `'${prefix}:' || $1`,
        params: ["sub_1"],
      });
    }
    expect(jobKey("thread-idle", "thr_1")).toBe("idle:thr_1");
  });

  it("have prefixes safe to write inline and distinct, so two kinds never share a key", () => {
    const prefixes = kinds.map((k) => JOB_KINDS[k].prefix);
    for (const prefix of prefixes) expect(prefix).toMatch(/^[a-z][a-z-]*$/);
    expect(new Set(prefixes).size).toBe(prefixes.length);
  });

  it("name a job's subject from its payload; none for an unknown kind or a missing field", () => {
    expect(jobSubject({ kind: "webhook", payload: { deliveryId: "msg_1" } })).toBe("msg_1");
    expect(jobSubject({ kind: "thread-idle", payload: { threadId: "thr_1", pulled: true } })).toBe("thr_1");
    expect(jobSubject({ kind: "episode", payload: {} })).toBeUndefined();
    expect(jobSubject({ kind: "nonsense", payload: { episodeId: "epi_1" } })).toBeUndefined();
    expect(isJobKind("toString")).toBe(false);
    expect(isJobKind("message-embed")).toBe(true);
    // Retired (migration 0017): an episode's extraction runs in its one `episode` job.
    expect(isJobKind("semantic")).toBe(false);
  });
});

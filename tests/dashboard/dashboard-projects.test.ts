import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { projects } from "../../lib/db/schema";
import { EMBED_DEBOUNCE_MS } from "../../lib/evidence/write";
import { runDueJobs } from "../../lib/jobs/runner";
import { DEFAULT_SETTINGS, MAX_EPISODE_INTERVAL_MS } from "../../lib/settings/settings";
import type { ApiSchema, Body } from "../helpers/api-types";
import { DIMS, useDashboardService } from "../helpers/dashboard-fixtures";
import { fakeEmbedding, near } from "../helpers/fake-openai";
import { keywordSignals } from "../helpers/keyword-oracle";

/**
 * The dashboard's project routes: one project, settings as form fields and resetting one,
 * activity per day, extraction failures, and the recall playground with its signal ranks.
 */
const { h, tenant, call, get, json, measured, expectError, expectValidation, rows, newSession } = useDashboardService();

const P = "/dashboard/projects";
/** A fact's score from its signals with the default weights (lib/settings/settings.ts). */
const fusedOf = (r: Signals) => {
  const w = DEFAULT_SETTINGS.semantic;
  return (
    (r.vector ?? 0) * w.vectorWeight +
    (r.keyword ?? 0) * w.keywordWeight +
    (r.entity ?? 0) * w.entityWeight +
    (r.time ?? 0) * w.timeWeight
  );
};

type SettingField = ApiSchema<"SettingField">;

const fieldsOf = async (projectId: string) =>
  (await get<{ fields: SettingField[] }>(`${P}/${projectId}/settings/fields`)).fields;
const patch = (projectId: string, body: unknown) => call(`${P}/${projectId}/settings`, { method: "PATCH", json: body });
const reset = (projectId: string, group: string, key: string) =>
  call(`${P}/${projectId}/settings/${group}/${key}`, { method: "DELETE" });
const storedSettings = async (projectId: string) =>
  (await h.svc.deps.db.select().from(projects).where(eq(projects.id, projectId)))[0].settings;

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/projects/{id}", () => {
  it("answers the project record in one statement; 404 for an unknown one", async () => {
    const t = await tenant("project-get");
    const m = await measured(`${P}/${t.projectId}`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const { project } = JSON.parse(m.text) as { project: { id: string; name: string; createdAt: string } };
    expect(Object.keys(project).sort()).toEqual(["createdAt", "id", "name"]);
    expect(project).toMatchObject({ id: t.projectId, name: t.projectName });
    expect(project.name).toMatch(/^project-get-/);
    const listed = await get<{ projects: unknown[] }>("/dashboard/projects?limit=100");
    expect(listed.projects).toContainEqual(project);
    await expectError(await call(`${P}/prj_nope`), 404, "Project not found");
    await expectError(
      await call(`${P}/${t.projectId}`, { token: null }),
      401,
      "Missing or invalid Authorization header",
    );
  });
});

describe("GET /dashboard/projects/{id}/settings/fields", () => {
  it("lists every setting in order, with the PATCH schemas' types and bounds, in one statement", async () => {
    const t = await tenant("fields");
    await patch(t.projectId, { working: { autoCompactThreshold: 20 } }); // the default, but stored
    const m = await measured(`${P}/${t.projectId}/settings/fields`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const { fields } = JSON.parse(m.text) as { fields: SettingField[] };
    const expectedOrder = (["working", "episodic", "semantic", "usage"] as const).flatMap((group) =>
      Object.keys(DEFAULT_SETTINGS[group]).map((key) => `${group}.${key}`),
    );
    expect(fields.map((f) => `${f.group}.${f.key}`)).toEqual(expectedOrder);
    const byKey = new Map(fields.map((f) => [`${f.group}.${f.key}`, f]));
    expect(byKey.get("working.autoCompactThreshold")).toMatchObject({
      type: "integer",
      nullable: true,
      minimum: 10,
      maximum: 1000,
      default: 20,
      value: 20,
      overridden: true,
    });
    expect(byKey.get("episodic.enabled")).toMatchObject({
      type: "boolean",
      nullable: false,
      minimum: null,
      maximum: null,
      default: true,
      value: true,
      overridden: false,
    });
    // The project's bound (10), not the thread override's (1).
    expect(byKey.get("episodic.maxMessages")).toMatchObject({ type: "integer", minimum: 10, maximum: 1000 });
    expect(byKey.get("episodic.autoEpisodeIntervalMs")).toMatchObject({
      type: "number",
      nullable: true,
      minimum: 1000,
      maximum: MAX_EPISODE_INTERVAL_MS,
      default: 1_800_000,
    });
    expect(byKey.get("semantic.similarityWeight")).toBeUndefined();
    expect(byKey.get("semantic.anchorVectorMin")).toMatchObject({ type: "number", minimum: 0, maximum: 1 });
    // The monthly token budget: off by default, past an int4 (read as bigint).
    expect(byKey.get("usage.monthlyTokenBudget")).toMatchObject({
      type: "integer",
      nullable: true,
      minimum: 1,
      maximum: 1e15,
      default: null,
      value: null,
    });
    for (const f of fields) {
      expect(f.description.length, `${f.group}.${f.key}`).toBeGreaterThan(10);
      expect(f.default).toEqual((DEFAULT_SETTINGS[f.group] as Record<string, unknown>)[f.key]);
      if (f.group !== "working") expect(f.overridden, `${f.group}.${f.key}`).toBe(false);
    }
  });

  it("bounds, types and nullability are exactly what PATCH accepts", async () => {
    const t = await tenant("fields-bounds");
    const fields = await fieldsOf(t.projectId);
    // The band keys are tied by the cross-field rule: move them together.
    const band = new Set(["contradictionBandMin", "factDedupThreshold"]);
    const body = (f: SettingField, value: unknown) => ({
      [f.group]: band.has(f.key) ? { contradictionBandMin: value, factDedupThreshold: value } : { [f.key]: value },
    });
    const accepts = async (f: SettingField, value: unknown) => {
      const res = await patch(t.projectId, body(f, value));
      await res.arrayBuffer();
      expect([200, 400], `${f.key}=${value}`).toContain(res.status);
      return res.status === 200;
    };
    for (const f of fields) {
      const where = `${f.group}.${f.key}`;
      expect({ where, accepted: await accepts(f, null) }).toEqual({ where, accepted: f.nullable });
      if (f.type === "boolean") {
        expect(await accepts(f, false)).toBe(true);
        expect(await accepts(f, 1)).toBe(false);
        continue;
      }
      if (f.minimum !== null) {
        expect({ where, at: await accepts(f, f.minimum), below: await accepts(f, f.minimum - 1) }).toEqual({
          where,
          at: true,
          below: false,
        });
      }
      if (f.maximum !== null) {
        expect({ where, at: await accepts(f, f.maximum), above: await accepts(f, f.maximum + 1) }).toEqual({
          where,
          at: true,
          above: false,
        });
      }
      const inside = f.minimum ?? 0;
      expect({ where, fraction: await accepts(f, inside + 0.5) }).toEqual({
        where,
        fraction: f.type === "number" && (f.maximum === null || inside + 0.5 <= f.maximum),
      });
    }
  });

  it("shows the merged value and overridden after a PATCH; 404 for an unknown project", async () => {
    const t = await tenant("fields-values");
    await patch(t.projectId, { episodic: { maxRetries: 7 }, semantic: { enabled: false } });
    const fields = await fieldsOf(t.projectId);
    expect(fields.find((f) => f.key === "maxRetries")).toMatchObject({ value: 7, default: 3, overridden: true });
    expect(fields.find((f) => f.group === "semantic" && f.key === "enabled")).toMatchObject({
      value: false,
      default: true,
      overridden: true,
    });
    expect(fields.find((f) => f.group === "episodic" && f.key === "enabled")).toMatchObject({ overridden: false });
    await expectError(await call(`${P}/prj_nope/settings/fields`), 404, "Project not found");
  });
});

describe("DELETE /dashboard/projects/{id}/settings/{group}/{key}", () => {
  it("removes the project's own value so the default applies; others stay; a second removal is a no-op", async () => {
    const t = await tenant("reset");
    await patch(t.projectId, { episodic: { maxRetries: 5, contextEpisodes: 4 }, semantic: { factsInContext: 12 } });
    // The session, the read, the conditional write.
    const removed = await measured(`${P}/${t.projectId}/settings/episodic/maxRetries`, { method: "DELETE" });
    expect(removed.status, removed.text).toBe(200);
    expect(removed.statements).toHaveLength(3);
    const { fields } = JSON.parse(removed.text) as { fields: SettingField[] };
    expect(fields).toEqual(await fieldsOf(t.projectId));
    expect(fields.find((f) => f.key === "maxRetries")).toMatchObject({ value: 3, overridden: false });
    expect(fields.find((f) => f.key === "contextEpisodes")).toMatchObject({ value: 4, overridden: true });
    expect(fields.find((f) => f.key === "factsInContext")).toMatchObject({ value: 12, overridden: true });
    // Stored: the key is gone (not set to the default), the rest untouched, and /settings agrees.
    expect(await storedSettings(t.projectId)).toEqual({
      working: { autoCompactThreshold: null },
      episodic: { contextEpisodes: 4 },
      semantic: { factsInContext: 12 },
    });
    const settings = await get<{ settings: typeof DEFAULT_SETTINGS }>(`${P}/${t.projectId}/settings`);
    expect(settings.settings.episodic.maxRetries).toBe(3);
    // Not overridden any more: 200, nothing written, one statement.
    const again = await measured(`${P}/${t.projectId}/settings/episodic/maxRetries`, { method: "DELETE" });
    expect(again.status).toBe(200);
    expect(JSON.parse(again.text)).toEqual({ fields });
    expect(again.statements).toHaveLength(2);
    expect(again.statements[1]).toMatch(/^select/i); // after the session's own statement
    // The last key of a group removes the group.
    await json(await reset(t.projectId, "semantic", "factsInContext"), 200);
    expect(await storedSettings(t.projectId)).toEqual({
      working: { autoCompactThreshold: null },
      episodic: { contextEpisodes: 4 },
    });
  });

  it("brings back the default of a setting overridden with null", async () => {
    const t = await tenant("reset-null"); // the fixture stores working.autoCompactThreshold: null
    expect((await fieldsOf(t.projectId))[0]).toMatchObject({
      key: "autoCompactThreshold",
      value: null,
      overridden: true,
    });
    const { fields } = await json<{ fields: SettingField[] }>(
      await reset(t.projectId, "working", "autoCompactThreshold"),
      200,
    );
    expect(fields[0]).toMatchObject({ key: "autoCompactThreshold", value: 20, overridden: false });
  });

  it("rejects a removal whose default would break contradictionBandMin <= factDedupThreshold, writing nothing", async () => {
    const t = await tenant("reset-band");
    await json(await patch(t.projectId, { semantic: { contradictionBandMin: 0.5, factDedupThreshold: 0.6 } }), 200);
    const before = await storedSettings(t.projectId);
    // The default band floor 0.8 is above the project's 0.6.
    await expectValidation(await reset(t.projectId, "semantic", "contradictionBandMin"), [
      "semantic",
      "contradictionBandMin",
    ]);
    expect(await storedSettings(t.projectId)).toEqual(before);
    // The other one is fine: the default dedup threshold 0.95 is above 0.5.
    const { fields } = await json<{ fields: SettingField[] }>(
      await reset(t.projectId, "semantic", "factDedupThreshold"),
      200,
    );
    expect(fields.find((f) => f.key === "factDedupThreshold")).toMatchObject({ value: 0.95, overridden: false });
  });

  it("404 Setting not found for an unknown group or key, 404 Project not found, 401 without a session", async () => {
    const t = await tenant("reset-404");
    for (const [group, key] of [
      ["episodic", "nope"],
      ["nope", "maxRetries"],
      ["semantic", "maxRetries"],
      ["episodic", "__proto__"],
      ["episodic", "constructor"],
      ["working", "hasOwnProperty"],
    ]) {
      await expectError(await reset(t.projectId, group, key), 404, "Setting not found");
    }
    await expectError(await reset("prj_nope", "episodic", "maxRetries"), 404, "Project not found");
    await expectError(
      await call(`${P}/${t.projectId}/settings/episodic/maxRetries`, { method: "DELETE", token: null }),
      401,
      "Missing or invalid Authorization header",
    );
  });
});

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/projects/{id}/activity", () => {
  it("counts episodes and facts created per UTC day, zero days included, today last, in one statement", async () => {
    h.clock.set(new Date("2026-03-10T15:00:00.000Z"));
    await newSession();
    const t = await tenant("activity");
    const other = await tenant("activity-other");
    await rows.episode(other.projectId, "ds", { createdAt: "2026-03-10T01:00:00.000Z" });
    await rows.fact(other.projectId, "ds", { predicate: "x", object: "y", createdAt: "2026-03-10T01:00:00.000Z" });
    for (const createdAt of [
      "2026-03-10T00:00:00.000Z", // today's first instant
      "2026-03-10T14:59:59.000Z",
      "2026-03-09T23:59:59.999Z", // yesterday's last
      "2026-02-09T00:00:00.000Z", // the first of 30 days
      "2026-02-08T23:59:59.999Z", // outside
    ]) {
      await rows.episode(t.projectId, "ds", { createdAt, status: "failed", summarised: false });
    }
    await rows.episode(t.projectId, "ds", { createdAt: "2026-03-08T12:00:00.000Z", status: "archived" });
    for (const createdAt of ["2026-03-10T10:00:00.000Z", "2026-03-08T10:00:00.000Z", "2026-03-08T11:00:00.000Z"]) {
      await rows.fact(t.projectId, "ds", { predicate: "x", object: createdAt, createdAt });
    }
    const m = await measured(`${P}/${t.projectId}/activity`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const { days } = JSON.parse(m.text) as { days: { day: string; episodes: number; facts: number }[] };
    expect(days).toHaveLength(30);
    expect(days[0].day).toBe("2026-02-09");
    expect(days.at(-1)?.day).toBe("2026-03-10");
    for (let i = 1; i < days.length; i++) {
      expect(Date.parse(days[i].day) - Date.parse(days[i - 1].day)).toBe(86_400_000);
    }
    const active = days.filter((d) => d.episodes > 0 || d.facts > 0);
    expect(active).toEqual([
      { day: "2026-02-09", episodes: 1, facts: 0 },
      { day: "2026-03-08", episodes: 1, facts: 2 },
      { day: "2026-03-09", episodes: 1, facts: 0 },
      { day: "2026-03-10", episodes: 2, facts: 1 },
    ]);
    expect(days.filter((d) => d.episodes === 0 && d.facts === 0)).toHaveLength(26);
    expect((await get<{ days: unknown[] }>(`${P}/${t.projectId}/activity?days=1`)).days).toEqual([
      { day: "2026-03-10", episodes: 2, facts: 1 },
    ]);
    expect((await get<{ days: unknown[] }>(`${P}/${t.projectId}/activity?days=365`)).days).toHaveLength(365);
  });

  it("400 for days outside 1-365, 404 for an unknown project", async () => {
    const t = await tenant("activity-400");
    for (const days of ["0", "366", "1.5", "x"]) {
      await expectValidation(await call(`${P}/${t.projectId}/activity?days=${days}`), ["days"]);
    }
    await expectError(await call(`${P}/prj_nope/activity`), 404, "Project not found");
  });
});

// -------------------------------------------------------------------------------------------------

describe("GET /dashboard/projects/{id}/extraction-failures", () => {
  it("lists completed episodes whose extraction failed, newest failure first, in one statement", async () => {
    const t = await tenant("failures");
    // A real failure: the extraction answer does not fit the schema.
    h.fake.onStructured("fact_extraction", () => ({ wrong: true }));
    const th = await t.thread("real");
    await t.conversation(th, ["I live in Lisbon", "Nice"]);
    const { episodeId: real } = await t.end(th);
    await runDueJobs(h.svc.deps);
    const failedAt = h.clock.now().toISOString();
    // Rows written directly: an older failure retried twice, and what is not listed.
    const older = await rows.episode(t.projectId, "other", {
      semanticStatus: "failed",
      semanticError: "Database error: boom",
      semanticRetryCount: 2,
      createdAt: "2025-01-01T00:00:00.000Z",
      updatedAt: "2025-01-02T00:00:00.000Z",
    });
    await rows.episode(t.projectId, "other", { semanticStatus: "completed" });
    await rows.episode(t.projectId, "other", { status: "archived", semanticStatus: "failed" });
    await rows.episode(t.projectId, "other", { status: "failed", summarised: false });
    const other = await tenant("failures-other");
    await rows.episode(other.projectId, "other", { semanticStatus: "failed" });

    const m = await measured(`${P}/${t.projectId}/extraction-failures`);
    expect(m.status, m.text).toBe(200);
    expect(m.statements).toHaveLength(2);
    const body = JSON.parse(m.text) as {
      failures: {
        episodeId: string;
        threadId: string;
        dataset: string;
        error: string | null;
        attempts: number;
        failedAt: string | null;
      }[];
      total: number;
    };
    expect(body.total).toBe(2);
    expect(body.failures.map((f) => f.episodeId)).toEqual([real, older]);
    expect(body.failures[0]).toMatchObject({ threadId: th, dataset: "real", attempts: 1, failedAt });
    expect(body.failures[0].error).toEqual(expect.any(String));
    expect(body.failures[1]).toEqual({
      episodeId: older,
      threadId: "thr_x",
      dataset: "other",
      error: "Database error: boom",
      attempts: 3,
      failedAt: "2025-01-02T00:00:00.000Z",
    });
    // /v1 shows the episode as plainly completed.
    expect(await t.episode(real as string)).toMatchObject({ status: "completed", error: null });
    const page = await get<{ failures: { episodeId: string }[]; total: number }>(
      `${P}/${t.projectId}/extraction-failures?limit=1&offset=1`,
    );
    expect(page).toEqual({ failures: [body.failures[1]], total: 2 });
  });

  it("404 for an unknown project, 400 for bad paging", async () => {
    const t = await tenant("failures-400");
    await expectError(await call(`${P}/prj_nope/extraction-failures`), 404, "Project not found");
    await expectValidation(await call(`${P}/${t.projectId}/extraction-failures?limit=0`), ["limit"]);
    await expectValidation(await call(`${P}/${t.projectId}/extraction-failures?offset=-1`), ["offset"]);
    expect(await get(`${P}/${t.projectId}/extraction-failures`)).toEqual({ failures: [], total: 0 });
  });
});

// -------------------------------------------------------------------------------------------------

type Signals = ApiSchema<"SignalScores">;
type Playground = Body<"/dashboard/projects/{id}/recall", "post", 200>;

describe("POST /dashboard/projects/{id}/recall", () => {
  const query = "what does the user drink at globex";

  async function seeded(name: string) {
    const t = await tenant(name);
    const q = fakeEmbedding(query, DIMS);
    const day = (d: number) => new Date(Date.UTC(2025, 0, d)).toISOString();
    const globex = await rows.entity(t.projectId, "ds", "Globex");
    const ids = {
      // Vector only: no shared word, close embedding.
      oolong: await rows.fact(t.projectId, "ds", {
        predicate: "enjoys",
        object: "oolong",
        embedding: near(q, 0.95, "o"),
        validAt: day(1),
      }),
      // Keyword only: no embedding, shares "drink".
      coffee: await rows.fact(t.projectId, "ds", {
        predicate: "drinks",
        object: "coffee",
        embedding: null,
        validAt: day(2),
      }),
      // Anchor only: touches Globex (named in the query), no embedding, no shared word.
      badge: await rows.fact(t.projectId, "ds", {
        predicate: "carries",
        object: "a badge",
        embedding: null,
        entities: [globex],
        validAt: day(3),
      }),
      // Vector and keyword.
      tea: await rows.fact(t.projectId, "ds", {
        predicate: "drinks",
        object: "tea",
        embedding: near(q, 0.9, "t"),
        validAt: day(4),
      }),
    };
    return { t, ids };
  }

  const playground = async (projectId: string, body: unknown, status = 200) =>
    json<Playground>(await call(`${P}/${projectId}/recall`, { method: "POST", json: body }), status);

  function expectConsistent(p: Playground) {
    expect(p.recall.facts).not.toBeNull();
    expect(p.signals.map((r) => r.factId)).toEqual(p.recall.facts?.map((f) => f.factId));
    for (const [i, r] of p.signals.entries()) {
      expect(r.fused).toBe(p.recall.facts?.[i].relevanceScore);
      if (p.mode !== "recent") expect(r.fused).toBeCloseTo(fusedOf(r), 12);
    }
  }

  it("answers /v1's recall with every fact's signal scores, from the same one statement", async () => {
    const { t, ids } = await seeded("playground");
    const m = await measured(`${P}/${t.projectId}/recall`, { method: "POST", json: { dataset: "ds", query } });
    expect(m.status, m.text).toBe(200);
    // The session, then recall's one statement: as /v1 (the API key, then one).
    expect(m.statements).toHaveLength(2);
    const p = JSON.parse(m.text) as Playground;
    expect(Object.keys(p).sort()).toEqual(["messageSignals", "mode", "recall", "rerank", "signals", "timing"]);
    expect(p.messageSignals).toEqual([]);
    expect(p.rerank).toBeNull();
    expect(p.mode).toBe("hybrid");
    const v1 = await t.get("/v1/memory/recall", { method: "POST", json: { dataset: "ds", query, include: ["raw"] } });
    expect(p.recall).toEqual(await v1.json());
    expectConsistent(p);
    const of = (id: string) => p.signals.find((r) => r.factId === id);
    // A fact without an embedding has cosine 0.
    expect(of(ids.oolong)).toMatchObject({ keyword: 0, entity: 0, time: 0 });
    // Embeddings are stored at half precision (migration 0013): cosine to about four digits.
    expect(of(ids.oolong)?.vector).toBeCloseTo(0.95, 4);
    expect(of(ids.coffee)).toMatchObject({ vector: 0, entity: 0, time: 0 });
    expect(of(ids.coffee)?.keyword).toBeGreaterThan(0);
    expect(of(ids.badge)).toMatchObject({ vector: 0, keyword: 0, entity: 1, time: 0 });
    expect(of(ids.tea)?.vector).toBeCloseTo(0.9, 4);
    expect(of(ids.tea)?.keyword).toBeGreaterThan(0);
    // The keyword score as docs/ranking.md defines it, computed apart from the service's SQL.
    const keywords = await keywordSignals(
      h.svc.deps,
      { projectId: t.projectId, dataset: "ds" },
      query,
      p.signals.map((r) => r.factId),
    );
    for (const r of p.signals) expect(r.keyword).toBeCloseTo(keywords.get(r.factId) as number, 12);
    expect(p.timing.map((x) => x.name)).toEqual(["embedding", "sql"]);
    for (const x of p.timing) expect(Object.keys(x).sort()).toEqual(["ms", "name"]);
  });

  it("asOf keeps hybrid mode; recent mode (no query): no signals, fused 1", async () => {
    const { t, ids } = await seeded("playground-modes");
    const asOf = await playground(t.projectId, { dataset: "ds", query, asOf: "2026-01-01" });
    expect(asOf.mode).toBe("hybrid");
    expectConsistent(asOf);
    expect(asOf.signals.find((r) => r.factId === ids.oolong)?.vector).toBeCloseTo(0.95, 4);

    const recent = await playground(t.projectId, { dataset: "ds", limit: 3 });
    expect(recent.mode).toBe("recent");
    expectConsistent(recent);
    expect(recent.signals).toHaveLength(3);
    expect(
      recent.signals.every((r) => r.fused === 1 && [r.vector, r.keyword, r.entity, r.time].every((x) => x === null)),
    ).toBe(true);
    expect(recent.timing.map((x) => x.name)).toEqual(["sql"]);
  });

  it("an embedding failure degrades to keyword mode, as /v1 does", async () => {
    const { t } = await seeded("playground-degraded");
    // A 500 on each of the client's three attempts: a 400 would read as `dimensions` refused and
    // leave the shared client asking without it for every later test.
    h.fake.fail({ status: 500, times: 3, endpoint: "embeddings" });
    const p = await playground(t.projectId, { dataset: "ds", query: `${query} today` });
    expect(p.mode).toBe("keyword");
    expectConsistent(p);
    expect(p.signals.every((r) => r.vector === null)).toBe(true);
  });

  it("takes the /v1 body: include, limit, minConfidence; raw is always included", async () => {
    const { t } = await seeded("playground-body");
    await rows.episode(t.projectId, "ds", { createdAt: "2025-06-01T00:00:00.000Z" });
    const p = await playground(t.projectId, { dataset: "ds", query, include: ["episodes"], limit: 2 });
    expect(p.recall.facts).toHaveLength(2);
    expect(p.recall.groups).not.toBeNull();
    expect(p.recall.episodes).toMatchObject({ episodeCount: 1 });
    expect(p.signals).toHaveLength(2);
    expectConsistent(p);
    const none = await playground(t.projectId, { dataset: "ds", query, minConfidence: 1 });
    expect(none).toMatchObject({ recall: { factCount: 0, facts: [] }, signals: [] });
  });

  it("with messages: each message's signals (cosine once embedded), /v1's messages without them", async () => {
    const { t } = await seeded("playground-messages");
    const thread = (await (await t.get("/v1/threads", { method: "POST", json: { dataset: "ds" } })).json()) as {
      threadId: string;
    };
    const added = await t.get(`/v1/memory/working/threads/${thread.threadId}/messages`, {
      method: "POST",
      json: { role: "user", content: "I drink oolong at Globex every morning." },
    });
    const { messageId } = (await added.json()) as { messageId: string };
    const body = { dataset: "ds", query, include: ["messages"] };

    // Searchable by keyword at once; no cosine before the thread's embedding job ran.
    const before = await playground(t.projectId, body);
    expect(before.recall.messages?.map((m) => m.messageId)).toEqual([messageId]);
    expect(before.messageSignals).toEqual([
      { messageId, vector: null, keyword: 1, entity: 0, time: 0, fused: before.recall.messages?.[0].relevanceScore },
    ]);

    h.clock.advance(EMBED_DEBOUNCE_MS);
    await runDueJobs(h.svc.deps);
    const after = await playground(t.projectId, body);
    const [m] = after.messageSignals;
    expect(m).toMatchObject({ messageId, keyword: 1, entity: 0, time: 0, vector: expect.any(Number) });
    expect(m.vector).not.toBe(0);
    expect(m.fused).toBe(after.recall.messages?.[0].relevanceScore);
    expect(m.fused).toBeCloseTo(fusedOf({ ...m, factId: "" }), 6);
    expect(after.recall.context).toContain("user: I drink oolong at Globex every morning.");
    // /v1 answers the same messages, without the signals.
    const v1 = await t.get("/v1/memory/recall", { method: "POST", json: { ...body, include: ["messages", "raw"] } });
    expect(after.recall).toEqual(await v1.json());
    expect(Object.keys(after.recall.messages?.[0] ?? {}).sort()).toEqual([
      "content",
      "createdAt",
      "messageId",
      "relevanceScore",
      "role",
      "threadId",
      "truncated",
    ]);

    const without = await playground(t.projectId, { dataset: "ds", query });
    expect(without).toMatchObject({ recall: { messages: null }, messageSignals: [] });
    const recent = await playground(t.projectId, { dataset: "ds", include: ["messages"] });
    expect(recent.messageSignals).toEqual([
      { messageId, vector: null, entity: null, keyword: null, time: null, fused: 1 },
    ]);
  });

  it("404 Project not found, 400 for the /v1 validation errors, 401 without a session", async () => {
    const t = await tenant("playground-errors");
    const m = await measured(`${P}/prj_nope/recall`, { method: "POST", json: { dataset: "ds", query: "x" } });
    expect({ status: m.status, body: m.text }).toEqual({
      status: 404,
      body: JSON.stringify({ error: "Project not found" }),
    });
    expect(m.statements).toHaveLength(2);
    for (const [body, path] of [
      [{}, ["dataset"]],
      [{ dataset: "ds", limit: 101 }, ["limit"]],
      [{ dataset: "ds", include: ["facts"] }, ["include", 0]],
      [{ dataset: "ds", asOf: "yesterday" }, ["asOf"]],
    ] as const) {
      await expectValidation(await call(`${P}/${t.projectId}/recall`, { method: "POST", json: body }), [...path]);
    }
    await expectError(
      await call(`${P}/${t.projectId}/recall`, { method: "POST", json: { dataset: "ds" }, token: null }),
      401,
      "Missing or invalid Authorization header",
    );
    const [{ n }] = await rows.query<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM facts WHERE project_id = ${t.projectId}`,
    );
    expect(n).toBe(0);
  });
});

import { sql } from "drizzle-orm";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { intQuery } from "../../functions/schemas/inputs";
import { rowsOf } from "../../lib/db/rows";
import { FLOAT4_MAX, FLOAT4_MIN_NORMAL, flushTiny, INT4_MAX, INT4_MIN, integerIn, numberIn } from "../../lib/numbers";
import {
  BAND_RULE_KEYS,
  DEFAULT_SETTINGS,
  resolveProjectSettings,
  resolveThreadSettings,
  settingRule,
} from "../../lib/settings/settings";
import { episodicSetting, projectSetting } from "../../lib/settings/sql";
import { createTestService, newTenant } from "../helpers/service";

/**
 * The shared numeric schemas (lib/numbers.ts) and the settings read rules (lib/settings/settings.ts in
 * JavaScript, lib/settings/sql.ts inside statements): what they accept, how they normalise, that
 * every value they let through is one Postgres holds, and that both read paths agree on any stored
 * value.
 */
const svc = await createTestService();
afterAll(() => svc.close());

/** Doubles at the edges: zeros, denormals, float4's limits, int4's, beyond float8's. */
const EXTREMES = [
  0,
  -0,
  5e-324,
  -5e-324,
  1e-320,
  1e-50,
  1e-45,
  1e-40,
  1e-38,
  FLOAT4_MIN_NORMAL,
  FLOAT4_MIN_NORMAL * (1 - 2 ** -52),
  0.5,
  1,
  1 + 2 ** -52,
  1000.5,
  INT4_MAX,
  INT4_MAX + 1,
  INT4_MIN - 1,
  2 ** 53,
  2 ** 53 + 2,
  FLOAT4_MAX,
  3.5e38,
  1e308,
  Number.MAX_VALUE,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  Number.NaN,
];
const anyDouble = fc.oneof(fc.constantFrom(...EXTREMES), fc.double(), fc.integer());

const BOUNDS: [number, number][] = [
  [0, 1],
  [0, INT4_MAX],
  [0, Number.MAX_SAFE_INTEGER],
  [1000, 3_153_600_000_000],
];

describe("numberIn", () => {
  it("accepts exactly the finite values within its bounds and flushes magnitudes below FLOAT4_MIN_NORMAL to 0", () => {
    fc.assert(
      fc.property(fc.constantFrom(...BOUNDS), anyDouble, ([min, max], x) => {
        const parsed = numberIn(min, max).safeParse(x);
        expect(parsed.success, `${x} in ${min}..${max}`).toBe(Number.isFinite(x) && x >= min && x <= max);
        if (!parsed.success) {
          expect(parsed.error.issues.length).toBeGreaterThan(0);
          return;
        }
        expect(Object.is(parsed.data, flushTiny(x))).toBe(true);
        expect(Object.is(parsed.data, -0)).toBe(false);
        // Representable as a float4 without underflow or overflow.
        const f4 = Math.fround(parsed.data);
        expect(Number.isFinite(f4) && (parsed.data === 0 || f4 !== 0)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("refuses bounds a `real` cannot hold", () => {
    expect(() => numberIn(0, 1e39)).toThrow(RangeError);
    expect(() => numberIn(Number.NEGATIVE_INFINITY, 0)).toThrow(RangeError);
    expect(() => numberIn(1, 0)).toThrow(RangeError);
    expect(() => numberIn(Number.NaN, 1)).toThrow(RangeError);
  });
});

describe("integerIn", () => {
  it("accepts exactly the integers within its bounds; -0 becomes 0", () => {
    fc.assert(
      fc.property(
        fc.constantFrom<[number, number]>([1, 100], [0, 10], [1, INT4_MAX], [0, 1_000_000]),
        anyDouble,
        ([min, max], x) => {
          const parsed = integerIn(min, max).safeParse(x);
          expect(parsed.success, `${x} in ${min}..${max}`).toBe(Number.isInteger(x) && x >= min && x <= max);
          if (parsed.success) expect(Object.is(parsed.data, x === 0 ? 0 : x)).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("refuses bounds an `integer` cannot hold", () => {
    expect(() => integerIn(0, INT4_MAX + 1)).toThrow(RangeError);
    expect(() => integerIn(INT4_MIN - 1, 0)).toThrow(RangeError);
    expect(() => integerIn(0, 1.5)).toThrow(RangeError);
  });
});

describe("intQuery", () => {
  it("rejects text that is not digits, and digits beyond the bounds, as a 400 issue", () => {
    const schema = intQuery(1, 100, 20);
    for (const text of [
      "NaN",
      "Infinity",
      "-Infinity",
      "1e309",
      "1e2",
      "1.5",
      "0x10",
      " ",
      "2147483648",
      "9".repeat(400),
    ]) {
      expect(schema.safeParse(text).success, text).toBe(false);
    }
    expect(schema.safeParse("42").data).toBe(42);
    expect(schema.safeParse(undefined).data).toBe(20);
    expect(Object.is(intQuery(0, 10).safeParse("-0").data, 0)).toBe(true);
  });
});

describe("accepted values in Postgres", () => {
  it("every value numberIn accepts survives ::real, ::float8::real and float8 products", async () => {
    const accepted = EXTREMES.flatMap((x) => {
      const parsed = numberIn(0, INT4_MAX).safeParse(Math.abs(x));
      return parsed.success ? [parsed.data] : [];
    });
    expect(accepted).toContain(0);
    for (const x of accepted) {
      const [row] = rowsOf<{ r: number; rr: number; p: number }>(
        await svc.deps.db.execute(
          sql`SELECT ${x}::real AS r, ${x}::float8::real AS rr, ${x}::float8 * 1e-16::float8 * 0.5::float8 AS p`,
        ),
      );
      // A real comes back as its shortest float4 text: compare as float4.
      expect(Math.fround(row.r), String(x)).toBe(Math.fround(x));
      expect(Math.fround(row.rr), String(x)).toBe(Math.fround(x));
      expect(Number.isFinite(row.p), String(x)).toBe(true);
    }
  });
});

// --- The settings read rules: JavaScript and SQL agree on any stored value -----------------------

const GROUPS = Object.keys(DEFAULT_SETTINGS) as (keyof typeof DEFAULT_SETTINGS)[];
/** Every setting SQL reads: the band rule's pair is resolved in JavaScript only (together). */
const keysOf = (group: keyof typeof DEFAULT_SETTINGS) =>
  Object.keys(DEFAULT_SETTINGS[group]).filter((key) => group !== "semantic" || !BAND_RULE_KEYS.includes(key));

/** A stored setting value: anything JSON can hold, weighted to the edges. */
const storedValue = fc.oneof(
  { arbitrary: fc.constantFrom(...EXTREMES), weight: 4 },
  { arbitrary: fc.constantFrom(-1, 2, 5, 9, 10, 11, 20, 999, 1000, 1001, 3_153_600_000_001, 1e20), weight: 2 },
  { arbitrary: fc.double(), weight: 1 },
  { arbitrary: fc.constantFrom(null, true, false, "0.5", "", [], {}, [1], { a: 1 }), weight: 2 },
);
const storedGroup = (group: keyof typeof DEFAULT_SETTINGS) =>
  fc.oneof(
    { arbitrary: fc.dictionary(fc.constantFrom(...keysOf(group), "unknownKey"), storedValue), weight: 8 },
    { arbitrary: fc.constantFrom(null, 5, "x", [], [{}]), weight: 1 },
  );
const storedSettings = fc.record(
  {
    working: storedGroup("working"),
    episodic: storedGroup("episodic"),
    semantic: storedGroup("semantic"),
    usage: storedGroup("usage"),
  },
  { requiredKeys: [] },
);

/** What a statement reads for every setting (each read as its callers cast it). */
function readAllSql(threadSettings: string) {
  const columns = GROUPS.flatMap((group) =>
    keysOf(group).map((key) => {
      const rule = settingRule(group, key as never);
      const cast =
        rule.type === "boolean"
          ? "boolean"
          : key === "autoEpisodeIntervalMs" || key === "monthlyTokenBudget"
            ? "bigint"
            : rule.integer
              ? "int"
              : "float8";
      const expr =
        group === "episodic"
          ? episodicSetting(key as never, sql`${threadSettings}::jsonb`, sql`p.settings`, cast)
          : projectSetting(group, key as never, sql`p.settings`, cast);
      return sql`${expr} AS ${sql.identifier(`${group}.${key}`)}`;
    }),
  );
  return sql.join(columns, sql`, `);
}

describe("stored settings", () => {
  it("every value the SQL read path yields is the one resolveProjectSettings/resolveThreadSettings yields", async () => {
    const t = await newTenant(svc, "settings-agree");
    await fc.assert(
      fc.asyncProperty(storedSettings, fc.option(storedGroup("episodic")), async (generated, threadGroup) => {
        // What the table holds is what JSON holds (-0 is 0, NaN and Infinity are null).
        const stored = JSON.parse(JSON.stringify(generated));
        const thread = JSON.parse(JSON.stringify({ episodic: threadGroup ?? undefined }));
        await svc.deps.db.execute(
          sql`UPDATE projects SET settings = ${JSON.stringify(stored)}::jsonb WHERE id = ${t.projectId}`,
        );
        const [row] = rowsOf<Record<string, unknown>>(
          await svc.deps.db.execute(
            sql`SELECT ${readAllSql(JSON.stringify(thread))} FROM projects p WHERE p.id = ${t.projectId}`,
          ),
        );
        const project = resolveProjectSettings(stored);
        const effective = resolveThreadSettings(project, thread);
        for (const group of GROUPS) {
          for (const key of keysOf(group)) {
            const js = (group === "episodic" ? effective : project)[group][key as never] as unknown;
            const fromSql = row[`${group}.${key}`];
            const where = `${group}.${key} stored ${JSON.stringify(stored[group]?.[key])}`;
            if (js === null || typeof js === "boolean") expect(fromSql, where).toBe(js);
            // bigint comes back as text or bigint depending on the driver; the timer rounds to whole ms.
            else if (key === "autoEpisodeIntervalMs") expect(Number(fromSql), where).toBe(Math.round(js as number));
            else expect(Number(fromSql), where).toBe(js);
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it("a stored value outside its rule reads as the default; a tiny one as 0; a valid one as itself", () => {
    const resolved = resolveProjectSettings({
      semantic: { retrievalMinConfidence: 1e-50, factsInContext: 1e10, anchorVectorMin: "0.9", anchorVectorTopK: 2.5 },
      episodic: { autoEpisodeIntervalMs: 1e300, maxRetries: null, similarityWeight: 5e-324, contextEpisodes: 7 },
      working: { autoCompactThreshold: null },
      unknown: { x: 1 },
    });
    expect(resolved).toEqual({
      working: { autoCompactThreshold: null },
      episodic: { ...DEFAULT_SETTINGS.episodic, similarityWeight: 0, contextEpisodes: 7 },
      semantic: { ...DEFAULT_SETTINGS.semantic, retrievalMinConfidence: 0 },
      usage: DEFAULT_SETTINGS.usage,
    });
    const thread = resolveThreadSettings(resolved, {
      episodic: { maxMessages: 5, maxRetries: 11, autoEpisodeIntervalMs: null, recencyWeight: 1e-45 },
    });
    expect(thread.episodic).toEqual({ ...resolved.episodic, maxMessages: 5, recencyWeight: 0 });
  });
});

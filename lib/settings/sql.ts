import { type SQL, sql } from "drizzle-orm";
import { constantSql } from "../db/constant-sql";
import { compiled } from "../db/types";
import { FLOAT4_MIN_NORMAL, INT4_MAX } from "../numbers";
import {
  BAND_RULE_KEYS,
  DEFAULT_SETTINGS,
  type EpisodicSettings,
  type SettingRule,
  type Settings,
  settingRule,
} from "./settings";

type Cast = "bigint" | "int" | "boolean" | "float8";

/** A numeric constant of ours (never input) as SQL text. */
function literal(n: number): SQL {
  if (!Number.isFinite(n)) throw new RangeError(`not a finite number: ${n}`);
  return sql.raw(`${n}::numeric`);
}

/** A setting's group or key (identifiers of ours) as a SQL string literal. */
function name(s: string): SQL {
  if (!/^[A-Za-z]+$/.test(s)) throw new Error(`unexpected setting name ${s}`);
  return sql.raw(`'${s}'`);
}

/**
 * Whether a stored jsonb value passes the setting's rule, the same rule lib/settings/settings.ts applies
 * in resolveProjectSettings: right JSON type, inside the bounds, whole when an integer. Never
 * fails itself: the numeric cast runs only on a jsonb number (CASE, not AND, fixes the order).
 */
function validSql(value: SQL, rule: SettingRule): SQL {
  if (rule.type === "boolean") return sql`(jsonb_typeof(${value}) = 'boolean')`;
  const n = sql`(${value})::numeric`;
  const whole = rule.integer ? sql` AND ${n} = trunc(${n})` : sql``;
  return sql`(CASE WHEN jsonb_typeof(${value}) = 'number'
    THEN ${n} BETWEEN ${literal(rule.minimum)} AND ${literal(rule.maximum)}${whole} ELSE false END)`;
}

/**
 * A valid stored value as `cast`: whole numbers round (a fractional interval in ms), and a float
 * below FLOAT4_MIN_NORMAL in magnitude is 0, as numberIn normalises it on write.
 */
function valueSql(value: SQL, rule: SettingRule, cast: Cast): SQL {
  if (rule.type === "boolean" || cast === "boolean") {
    if (rule.type !== "boolean" || cast !== "boolean") throw new Error("a boolean setting is read as boolean");
    return sql`(${value})::boolean`;
  }
  const n = sql`(${value})::numeric`;
  if (cast === "float8") {
    return sql`(CASE WHEN abs(${n}) < ${literal(FLOAT4_MIN_NORMAL)} THEN 0 ELSE ${n} END)::float8`;
  }
  if (cast === "int" && rule.maximum > INT4_MAX) throw new Error("the setting's bounds do not fit an int");
  return sql`round(${n})::${sql.raw(cast)}`;
}

/**
 * An effective setting computed inside a statement, with the same precedence and the same rules
 * as lib/settings/settings.ts (defaults, then the project's valid value, then, for the episodic group, the
 * thread's valid non-null override), so a statement can read settings itself instead of a round
 * trip before it. A stored value its rule rejects (out of range, fractional where whole, wrong
 * type: written before a bound existed or straight into the table) counts as absent, so one bad
 * setting cannot fail every statement that reads it. A project's explicit JSON null on a nullable
 * setting (autoEpisodeIntervalMs: null) yields SQL NULL.
 */
function settingSql<G extends keyof Settings>(
  group: G,
  key: keyof Settings[G] & string,
  projectSettings: SQL,
  cast: Cast,
  threadSettings?: SQL,
): SQL {
  // Their stored pair is dropped as a whole when it breaks the rule: a per-field CASE cannot.
  if (group === "semantic" && BAND_RULE_KEYS.includes(key)) {
    throw new Error(`semantic.${key} is read with resolveProjectSettings, which applies the band rule`);
  }
  const build = (): SQL => {
    const fallback = DEFAULT_SETTINGS[group][key] as unknown;
    const path = sql`-> ${name(group)} -> ${name(key)}`;
    const rule = settingRule(group, key, "project");
    const project = sql`(${projectSettings} ${path})`;
    let thread = sql``;
    if (threadSettings) {
      const own = sql`(${threadSettings} ${path})`;
      const threadRule = settingRule(group, key, "thread");
      thread = sql`WHEN ${validSql(own, threadRule)} THEN ${valueSql(own, threadRule, cast)}`;
    }
    const explicitNull = rule.nullable ? sql`WHEN jsonb_typeof(${project}) = 'null' THEN NULL` : sql``;
    return sql`(CASE ${thread} ${explicitNull}
      WHEN ${validSql(project, rule)} THEN ${valueSql(project, rule, cast)}
      ELSE ${fallback === null ? sql`NULL` : sql.raw(String(fallback))}::${sql.raw(cast)}
    END)`;
  };
  // Built once per setting and source columns (the CASE is some sixty chunks, built on every
  // append otherwise); a source with a parameter in it is built each time.
  const sources = compiled(sql`${projectSettings} / ${threadSettings ?? sql``}`);
  return sources.params.length > 0 ? build() : constantSql(`setting ${group}.${key}::${cast} of ${sources.sql}`, build);
}

/** An episodic setting: defaults, then the project's, then the thread's override. */
export function episodicSetting(
  key: keyof EpisodicSettings,
  threadSettings: SQL,
  projectSettings: SQL,
  cast: Cast,
): SQL {
  return settingSql("episodic", key, projectSettings, cast, threadSettings);
}

/** A project-level setting (defaults, then the project's): no thread override applies. */
export function projectSetting<G extends keyof Settings>(
  group: G,
  key: keyof Settings[G] & string,
  projectSettings: SQL,
  cast: Cast,
): SQL {
  return settingSql(group, key, projectSettings, cast);
}

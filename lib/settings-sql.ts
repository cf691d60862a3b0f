import { type SQL, sql } from "drizzle-orm";
import { DEFAULT_SETTINGS, type EpisodicSettings, type Settings } from "./settings";

type Cast = "bigint" | "int" | "boolean";

/**
 * An effective setting computed inside a statement, with the same precedence as lib/settings.ts
 * (defaults, then project, then, for the episodic group, the thread's non-null override), so a
 * statement can read settings itself instead of a round trip before it. A project's explicit JSON
 * null (autoEpisodeIntervalMs: null) yields SQL NULL.
 */
function settingSql<G extends keyof Settings>(
  group: G,
  key: keyof Settings[G] & string,
  projectSettings: SQL,
  cast: Cast,
  threadSettings?: SQL,
): SQL {
  const fallback = DEFAULT_SETTINGS[group][key] as unknown;
  const thread = threadSettings
    ? sql`WHEN jsonb_typeof(${threadSettings} -> ${group} -> ${key}) IS NOT NULL
         AND jsonb_typeof(${threadSettings} -> ${group} -> ${key}) <> 'null'
      THEN (${threadSettings} -> ${group} ->> ${key})::${sql.raw(cast)}`
    : sql``;
  return sql`(CASE ${thread}
    WHEN jsonb_typeof(${projectSettings} -> ${group} -> ${key}) IS NOT NULL
      THEN (${projectSettings} -> ${group} ->> ${key})::${sql.raw(cast)}
    ELSE ${fallback === null ? sql`NULL` : sql.raw(String(fallback))}::${sql.raw(cast)}
  END)`;
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

import { type SQL, sql } from "drizzle-orm";
import { DEFAULT_SETTINGS, type EpisodicSettings } from "../settings";

/**
 * An effective episodic setting computed inside a statement, with the same precedence as
 * lib/settings.ts (defaults, then project, then the thread's non-null override), so triggers can
 * read settings in the statement that acts on them instead of a round trip before it.
 * A project's explicit JSON null (autoEpisodeIntervalMs: null) yields SQL NULL.
 */
export function episodicSetting(
  key: keyof EpisodicSettings,
  threadSettings: SQL,
  projectSettings: SQL,
  cast: "bigint" | "int" | "boolean",
): SQL {
  const fallback = DEFAULT_SETTINGS.episodic[key];
  return sql`(CASE
    WHEN jsonb_typeof(${threadSettings} -> 'episodic' -> ${key}) IS NOT NULL
         AND jsonb_typeof(${threadSettings} -> 'episodic' -> ${key}) <> 'null'
      THEN (${threadSettings} -> 'episodic' ->> ${key})::${sql.raw(cast)}
    WHEN jsonb_typeof(${projectSettings} -> 'episodic' -> ${key}) IS NOT NULL
      THEN (${projectSettings} -> 'episodic' ->> ${key})::${sql.raw(cast)}
    ELSE ${fallback === null ? sql`NULL` : sql.raw(String(fallback))}::${sql.raw(cast)}
  END)`;
}

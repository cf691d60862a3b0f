import { and, eq, sql } from "drizzle-orm";
import { z } from "zod";
import type { ProjectContext } from "../context";
import { projects } from "../db/schema";
import type { Deps } from "../deps";
import { conflict, notFound } from "../errors";
import {
  BAND_RULE_KEYS,
  crossFieldIssues,
  deepMerge,
  mergeProjectSettings,
  resolveProjectSettings,
  type Settings,
  type SettingsPatch,
} from "./settings";

/*
 * A project's settings as stored (a partial object in projects.settings) and as they apply
 * (resolveProjectSettings: the one merge in JavaScript; lib/settings/sql.ts is the same merge
 * inside a statement).
 */

type StoredSettings = Record<string, unknown>;

/** The project's own partial settings, as stored (not merged); one statement. */
export async function storedSettings(deps: Deps, projectId: string): Promise<StoredSettings> {
  return (await settingsToChange(deps, projectId)).current;
}

/**
 * The stored settings, and the database's own text of them: a change is written only while that
 * text is unchanged. Compared as the object JavaScript read back, a stored number beyond a
 * double's precision or range (written by hand) never matched, and every change, a reset
 * included, answered 409.
 */
async function settingsToChange(deps: Deps, projectId: string) {
  const [row] = await deps.db
    .select({ settings: projects.settings, asText: sql<string>`${projects.settings}::text` })
    .from(projects)
    .where(eq(projects.id, projectId));
  if (!row) throw notFound("Project not found");
  return { current: row.settings ?? {}, asText: row.asText };
}

/** The project's effective settings: the defaults, then its own valid values (resolveProjectSettings). */
export async function getProjectSettings({ deps, projectId }: ProjectContext): Promise<Settings> {
  return resolveProjectSettings(await storedSettings(deps, projectId));
}

/**
 * How many times a settings change is re-applied when another change lands between read and
 * write. Each round lands one of the changes racing it, so N changes at once need up to N rounds
 * (a review saw 4 of 30 parallel changes fail at 5); a short random pause between rounds spreads
 * them out. 20 rounds are 40 statements: within a Worker's subrequest limit (50 on the free plan).
 */
const SETTINGS_ATTEMPTS = 20;
const SETTINGS_RETRY_PAUSE_MS = 20;

/** What a change that lost every round answers: the client retries it (409, not a 500). */
const SETTINGS_CONFLICT = "The project's settings were changed by other requests meanwhile; try again";

/**
 * Applies `change` to the project's stored partial settings and checks the merged result's
 * cross-field rule. The write is conditional on the stored object being the one that was read
 * and checked (optimistic concurrency), so two changes that are each valid alone cannot combine
 * into settings that break the rule; the loser re-reads, re-checks and either lands or gets 400.
 * `change` returning the object it was given writes nothing. Answers the stored settings.
 */
export async function changeProjectSettings(
  deps: Deps,
  projectId: string,
  change: (current: StoredSettings) => StoredSettings,
): Promise<StoredSettings> {
  for (let attempt = 0; attempt < SETTINGS_ATTEMPTS; attempt++) {
    const { current, asText } = await settingsToChange(deps, projectId);
    const stored = change(current);
    if (stored === current) return current;
    const changed = changedPairKeys(current, stored);
    const issues = crossFieldIssues(mergeProjectSettings(stored), changed);
    // ZodRealError, not ZodError: only the former is an Error, which Hono's onError requires.
    if (issues.length > 0 && (crossFieldIssues(mergeProjectSettings(current)).length === 0 || changed.length > 0)) {
      throw new z.ZodRealError(issues);
    }
    const updated = await deps.db
      .update(projects)
      .set({
        settings: stored,
        ...(budgetOf(stored) !== budgetOf(current) ? { budgetChangedAt: deps.clock.now() } : {}),
      })
      .where(and(eq(projects.id, projectId), sql`${projects.settings}::text = ${asText}`))
      .returning({ settings: projects.settings });
    if (updated.length > 0) return updated[0].settings ?? {};
    await new Promise((resolve) => setTimeout(resolve, Math.random() * SETTINGS_RETRY_PAUSE_MS));
  }
  throw conflict(SETTINGS_CONFLICT);
}

/** A group's stored value of `key`, as stored (undefined when absent). */
function storedValue(settings: StoredSettings, group: string, key: string): unknown {
  const values = settings[group];
  return values && typeof values === "object" ? (values as Record<string, unknown>)[key] : undefined;
}

/** The stored monthly token budget, as text (absent and null alike): a change of it is recorded. */
function budgetOf(settings: StoredSettings): string {
  return JSON.stringify(storedValue(settings, "usage", "monthlyTokenBudget") ?? null);
}

/**
 * The keys of the rule's pair a change touches (a refusal names them). A stored pair that already
 * broke the rule is ignored where settings are read (resolveProjectSettings); a change to anything
 * else must not be refused for it, or no setting could be changed until the pair is: a change to
 * the pair is checked.
 */
function changedPairKeys(before: StoredSettings, after: StoredSettings): string[] {
  const stored = (s: StoredSettings, key: string) => JSON.stringify(storedValue(s, "semantic", key));
  return BAND_RULE_KEYS.filter((key) => stored(before, key) !== stored(after, key));
}

/** Deep-merges a partial settings object into the project's (see changeProjectSettings). */
export async function patchProjectSettings(
  { deps, projectId }: ProjectContext,
  patch: SettingsPatch,
): Promise<Settings> {
  const stored = await changeProjectSettings(deps, projectId, (current) => deepMerge(current, patch as StoredSettings));
  return resolveProjectSettings(stored);
}

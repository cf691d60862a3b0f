import { z } from "zod";

/**
 * Project settings: stored per project as a partial object, deep-merged over these defaults at
 * read time. A thread may override the episodic group at creation (with its own bounds).
 */
export const DEFAULT_SETTINGS = {
  episodic: {
    enabled: true,
    autoEpisodeIntervalMs: 1_800_000 as number | null,
    maxMessages: 100,
    maxRetries: 3,
    contextEpisodes: 3,
    similarityWeight: 0.7,
    recencyWeight: 0.3,
  },
  working: {
    /**
     * When an insert brings a thread's un-compacted messages to this many, older messages are
     * compacted inline; null turns auto-compaction off. Also the bound below which prepare's
     * messageLimit draws a warning.
     */
    autoCompactThreshold: 20 as number | null,
  },
  semantic: {
    enabled: true,
    retrievalMinConfidence: 0.5,
    factsInContext: 8,
    entityResolutionThreshold: 0.88,
    factDedupThreshold: 0.95,
    contradictionBandMin: 0.8,
    anchorVectorMin: 0.75,
    anchorVectorTopK: 3,
  },
};

export type Settings = typeof DEFAULT_SETTINGS;
export type EpisodicSettings = Settings["episodic"];

const unit = () => z.number().min(0).max(1);

function episodicShape(maxMessagesMin: number) {
  return {
    enabled: z.boolean().describe("Cut conversations into episodes (messages are stored either way)."),
    autoEpisodeIntervalMs: z
      .number()
      .min(1000)
      .nullable()
      .describe("Idle time after a thread's last message before its episode is cut (ms); null turns the timer off."),
    maxMessages: z
      .number()
      .int()
      .min(maxMessagesMin)
      .max(1000)
      .describe("Messages of an episode's transcript sent to the model; longer ones keep the head and the tail."),
    maxRetries: z.number().int().min(0).max(10).describe("Background retries of a failed episode."),
    contextEpisodes: z.number().int().min(1).max(20).describe("Episodes recall returns when asked for episodes."),
    similarityWeight: unit().describe("Weight of the query's similarity in an episode's relevance."),
    recencyWeight: unit().describe("Weight of recency in an episode's relevance."),
  };
}

const semanticShape = {
  enabled: z.boolean().describe("Extract facts and entities from completed episodes."),
  retrievalMinConfidence: unit().describe(
    "Lowest confidence a fact needs to be recalled (recall's default minConfidence).",
  ),
  factsInContext: z.number().int().min(1).max(100).describe("Facts in recall's block (recall's default limit)."),
  entityResolutionThreshold: unit().describe("Similarity above which a new entity is the same as an existing one."),
  factDedupThreshold: unit().describe(
    "Similarity at which a new fact duplicates a live one (the top of the contradiction band).",
  ),
  contradictionBandMin: unit().describe(
    "Lowest similarity at which a new fact is checked for contradicting a live one (at most factDedupThreshold).",
  ),
  anchorVectorMin: unit().describe("Lowest similarity for an entity near the query to anchor recall."),
  anchorVectorTopK: z.number().int().min(1).max(10).describe("Entities nearest the query that may anchor recall."),
};

const workingShape = {
  autoCompactThreshold: z
    .number()
    .int()
    .min(10)
    .max(1000)
    .nullable()
    .describe("Un-compacted messages at which a thread is compacted inline; null turns auto-compaction off."),
};

/** Partial working-memory settings of a project. */
export const projectWorkingPatch = z.object(workingShape).partial();

/** Partial episodic override of a project (project bounds). */
export const projectEpisodicPatch = z.object(episodicShape(10)).partial();
/** Partial semantic override of a project. */
export const projectSemanticPatch = z.object(semanticShape).partial();

/** Body of PATCH /dashboard/projects/:id/settings: a subset of either group. */
export const settingsPatchSchema = z.object({
  working: projectWorkingPatch.optional(),
  episodic: projectEpisodicPatch.optional(),
  semantic: projectSemanticPatch.optional(),
});
export type SettingsPatch = z.infer<typeof settingsPatchSchema>;

/**
 * Thread-level episodic override (thread bounds: maxMessages may go down to 1). Null values are
 * accepted here and stripped before merging, so a partial override never erases a default.
 */
export const threadEpisodicOverride = z.object(
  Object.fromEntries(Object.entries(episodicShape(1)).map(([k, v]) => [k, v.nullable().optional()])) as {
    [K in keyof ReturnType<typeof episodicShape>]: z.ZodOptional<z.ZodNullable<ReturnType<typeof episodicShape>[K]>>;
  },
);

export type ThreadSettings = { episodic?: Partial<EpisodicSettings> };

type Plain = Record<string, unknown>;
/** A JSON object (not an array, not null). */
export const isPlain = (v: unknown): v is Plain => typeof v === "object" && v !== null && !Array.isArray(v);

/** Deep merge where `undefined` in the patch leaves the base value alone. */
export function deepMerge<T extends Plain>(base: T, patch: Plain | undefined): T {
  if (!patch) return base;
  const out: Plain = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    out[key] = isPlain(value) && isPlain(out[key]) ? deepMerge(out[key] as Plain, value) : value;
  }
  return out as T;
}

/** Remove null and undefined values (recursively) from a thread override. */
export function stripNullish<T>(value: T): T {
  if (!isPlain(value)) return value;
  const out: Plain = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null || v === undefined) continue;
    out[k] = isPlain(v) ? stripNullish(v) : v;
  }
  return out as T;
}

/** Built-in defaults, then project settings (read-time merge). */
export function resolveProjectSettings(stored: Plain | null | undefined): Settings {
  return deepMerge(structuredClone(DEFAULT_SETTINGS), stored ?? undefined);
}

/** Then the thread's episodic override. */
export function resolveThreadSettings(project: Settings, thread: ThreadSettings | null | undefined): Settings {
  return { ...project, episodic: deepMerge(project.episodic, stripNullish(thread?.episodic) ?? undefined) };
}

/**
 * Checks the merged result for what single-field bounds cannot see: the dedup threshold is the
 * top of the contradiction band, so the band's floor may not exceed it.
 */
export function crossFieldIssues(settings: Settings): z.core.$ZodIssue[] {
  if (settings.semantic.contradictionBandMin > settings.semantic.factDedupThreshold) {
    return [
      {
        code: "custom",
        path: ["semantic", "contradictionBandMin"],
        message: "contradictionBandMin must not exceed factDedupThreshold (the top of the contradiction band)",
        input: settings.semantic.contradictionBandMin,
      },
    ];
  }
  return [];
}

import { z } from "zod";
import { integerIn, numberIn } from "../numbers";

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
    vectorWeight: 1,
    keywordWeight: 0.5,
    entityWeight: 0.1,
    timeWeight: 0.3,
    rerank: false,
    rerankCandidates: 20,
    rerankTimeoutMs: 2000,
    /**
     * Correctness first (issue 34): past FACTS_AT_EF_MAX facts one HNSW search misses some of
     * the true nearest (recall@10 0.888 at a million on the bench's server), reading on past it
     * finds them (extraScanFor); a project that prefers speed turns it off.
     */
    vectorSecondSearch: true,
    /** Chosen on bench:quality (docs/memory.md): the evidence gained per token flattens past 4. */
    messagesInContext: 6,
    indexAssistantMessages: false,
  },
  usage: {
    /**
     * Tokens the project may spend per calendar month (UTC), as the provider reports them; null
     * (the default): no budget. Spent: extraction waits, synthesis is null, chat answers 429.
     */
    monthlyTokenBudget: null as number | null,
  },
};

export type Settings = typeof DEFAULT_SETTINGS;
export type EpisodicSettings = Settings["episodic"];

/**
 * The longest idle interval: 100 years of 365 days. The timer's due time (last message + interval)
 * must stay a date both Postgres and JavaScript hold; the spec gives no upper bound.
 */
export const MAX_EPISODE_INTERVAL_MS = 100 * 365 * 24 * 60 * 60 * 1000;

/** A 0-1 setting; below about 1.18e-38 it becomes 0 (numberIn). */
const unit = () => numberIn(0, 1);

function episodicShape(maxMessagesMin: number) {
  return {
    enabled: z.boolean().describe("Cut conversations into episodes (messages are stored either way)."),
    autoEpisodeIntervalMs: numberIn(1000, MAX_EPISODE_INTERVAL_MS)
      .nullable()
      .describe("Idle time after a thread's last message before its episode is cut (ms); null turns the timer off."),
    maxMessages: integerIn(maxMessagesMin, 1000).describe(
      "Messages of an episode's transcript sent to the model; longer ones keep the head and the tail.",
    ),
    maxRetries: integerIn(0, 10).describe("Background retries of a failed episode."),
    contextEpisodes: integerIn(1, 20).describe("Episodes recall returns when asked for episodes."),
    similarityWeight: unit().describe("Weight of the query's similarity in an episode's relevance."),
    recencyWeight: unit().describe("Weight of recency in an episode's relevance."),
  };
}

const semanticShape = {
  enabled: z.boolean().describe("Extract facts and entities from completed episodes."),
  retrievalMinConfidence: unit().describe(
    "Lowest confidence a fact needs to be recalled (recall's default minConfidence).",
  ),
  factsInContext: integerIn(1, 100).describe("Facts in recall's block (recall's default limit)."),
  entityResolutionThreshold: unit().describe("Similarity above which a new entity is the same as an existing one."),
  factDedupThreshold: unit().describe(
    "Similarity at which a new fact duplicates a live one (the top of the contradiction band).",
  ),
  contradictionBandMin: unit().describe(
    "Lowest similarity at which a new fact is checked for contradicting a live one (at most factDedupThreshold).",
  ),
  anchorVectorMin: unit().describe("Lowest similarity for an entity near the query to anchor recall."),
  anchorVectorTopK: integerIn(1, 10).describe("Entities nearest the query that may anchor recall."),
  vectorWeight: numberIn(0, 10).describe("Weight of the query's cosine similarity in a fact's recall score."),
  keywordWeight: numberIn(0, 10).describe(
    "Weight of the keyword score (BM25 over the fact and its quote, divided by the larger of the best candidate's and that of two words no other fact holds) in a fact's recall score.",
  ),
  entityWeight: numberIn(0, 10).describe(
    "Boost for a fact touching an entity named in the query (times the similarity for an entity near the query).",
  ),
  timeWeight: numberIn(0, 10).describe(
    'Boost for a fact valid in a time the query names ("in May 2023", "last week").',
  ),
  rerank: z
    .boolean()
    .describe("Reorder recall's best candidates with the reranker (a /rerank endpoint or the chat model)."),
  rerankCandidates: integerIn(2, 100).describe("Candidates recall sends to the reranker."),
  rerankTimeoutMs: integerIn(100, 30_000).describe(
    "How long recall waits for the reranker before keeping the fused order (ms).",
  ),
  vectorSecondSearch: z
    .boolean()
    .describe(
      "Past 160,000 facts in a dataset, search the vector index again from where the first search stopped, reading 1,000 more candidates, 2,000 at a million facts (on by default): more of the truly nearest facts (at a million, about 0.97-0.99 of the true 10 instead of 0.89), a slower recall (at a million facts with the data cached, about 25 ms more on a PostgreSQL server and 40 ms more on the embedded database; several times more when it is read from disk). Off trades those facts for speed.",
    ),
  messagesInContext: integerIn(1, 100).describe(
    "Messages in recall's block when `include` has \"messages\" (recall's default messageLimit).",
  ),
  indexAssistantMessages: z
    .boolean()
    .describe(
      "Index the assistant's messages for recall beside the user's (new messages only); off: recall quotes only what the user said.",
    ),
};

const workingShape = {
  autoCompactThreshold: integerIn(10, 1000)
    .nullable()
    .describe("Un-compacted messages at which a thread is compacted inline; null turns auto-compaction off."),
};

/** The largest budget: what a bigint sum compares with exactly and JSON carries as a safe integer. */
export const MAX_MONTHLY_TOKEN_BUDGET = 1_000_000_000_000_000;

const usageShape = {
  // Not integerIn: a budget may pass an int4 (billions of tokens a month); it is read as bigint.
  monthlyTokenBudget: z
    .number()
    .int()
    .min(1)
    .max(MAX_MONTHLY_TOKEN_BUDGET)
    .nullable()
    .describe(
      "Tokens the project may spend per calendar month (UTC), as the provider reports them; null: no budget. When spent, extraction waits, synthesis is null and chat answers 429 until the month ends or the budget is raised.",
    ),
};

/** Each setting's schema at project level (what PATCH accepts, and what a stored value must be). */
const projectShapes = {
  working: workingShape,
  episodic: episodicShape(10),
  semantic: semanticShape,
  usage: usageShape,
} as const;
/** The episodic group at thread level (maxMessages may go down to 1). */
const threadEpisodicShape = episodicShape(1);

/** Partial working-memory settings of a project. */
export const projectWorkingPatch = z.object(workingShape).partial();

/** Partial episodic override of a project (project bounds). */
export const projectEpisodicPatch = z.object(projectShapes.episodic).partial();
/** Partial semantic override of a project. */
export const projectSemanticPatch = z.object(semanticShape).partial();

/** Partial usage settings of a project (its monthly token budget). */
export const projectUsagePatch = z.object(usageShape).partial();

/** Body of PATCH /dashboard/projects/:id/settings: a subset of either group. */
export const settingsPatchSchema = z.object({
  working: projectWorkingPatch.optional(),
  episodic: projectEpisodicPatch.optional(),
  semantic: projectSemanticPatch.optional(),
  usage: projectUsagePatch.optional(),
});
export type SettingsPatch = z.infer<typeof settingsPatchSchema>;

/**
 * Thread-level episodic override (thread bounds: maxMessages may go down to 1). Null values are
 * accepted here and stripped before merging, so a partial override never erases a default.
 */
export const threadEpisodicOverride = z.object(
  Object.fromEntries(Object.entries(threadEpisodicShape).map(([k, v]) => [k, v.nullable().optional()])) as {
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

/**
 * The stored values of one group that its schemas accept, as they accept them (normalised the
 * same way); any other stored value (written before a bound existed, or straight into the
 * table) is left out, so the default applies instead of the value failing a later statement.
 * Unknown keys are left out too. lib/settings/sql.ts applies the same rules inside SQL.
 */
function validGroup(shape: Record<string, z.ZodType>, stored: unknown): Plain {
  const out: Plain = {};
  if (!isPlain(stored)) return out;
  for (const [key, schema] of Object.entries(shape)) {
    if (!Object.hasOwn(stored, key)) continue;
    const parsed = schema.safeParse(stored[key]);
    if (parsed.success) out[key] = parsed.data;
  }
  return out;
}

/**
 * Built-in defaults, then the project's valid stored values (read-time merge). A stored pair that
 * breaks the cross-field rule (a band floor above the dedup threshold, written before the rule
 * existed or straight into the table) is left out as a whole, as a single value out of its bounds
 * is: both take their defaults, which keep the rule.
 */
export function resolveProjectSettings(stored: Plain | null | undefined): Settings {
  // BAND_RULE_KEYS: the pair is read here only (lib/settings/sql.ts refuses them).
  const merged = mergeProjectSettings(stored);
  if (crossFieldIssues(merged).length === 0) return merged;
  const { contradictionBandMin, factDedupThreshold } = DEFAULT_SETTINGS.semantic;
  return { ...merged, semantic: { ...merged.semantic, contradictionBandMin, factDedupThreshold } };
}

/** The merge alone, each value checked on its own: what a change is checked against (crossFieldIssues). */
export function mergeProjectSettings(stored: Plain | null | undefined): Settings {
  const own = isPlain(stored) ? stored : {};
  return {
    working: { ...DEFAULT_SETTINGS.working, ...validGroup(projectShapes.working, own.working) },
    episodic: { ...DEFAULT_SETTINGS.episodic, ...validGroup(projectShapes.episodic, own.episodic) },
    semantic: { ...DEFAULT_SETTINGS.semantic, ...validGroup(projectShapes.semantic, own.semantic) },
    usage: { ...DEFAULT_SETTINGS.usage, ...validGroup(projectShapes.usage, own.usage) },
  };
}

/** Then the thread's episodic override: its non-null values that the thread bounds accept. */
export function resolveThreadSettings(project: Settings, thread: ThreadSettings | Plain | null | undefined): Settings {
  const override = validGroup(threadEpisodicShape, stripNullish(isPlain(thread) ? thread.episodic : undefined));
  return { ...project, episodic: { ...project.episodic, ...override } };
}

/** What a stored value of one setting must be, read from the schema that validates it. */
export type SettingRule =
  | { type: "boolean"; nullable: boolean }
  | { type: "number"; nullable: boolean; integer: boolean; minimum: number; maximum: number };

export function settingRule<G extends keyof Settings>(
  group: G,
  key: keyof Settings[G] & string,
  level: "project" | "thread" = "project",
): SettingRule {
  const shape: Record<string, z.ZodType> =
    level === "thread" && group === "episodic" ? threadEpisodicShape : projectShapes[group];
  let schema = shape[key];
  if (!schema) throw new Error(`setting ${group}.${key} has no schema`);
  const nullable = schema instanceof z.ZodNullable;
  if (schema instanceof z.ZodNullable) schema = schema.unwrap() as z.ZodType;
  if (schema instanceof z.ZodBoolean) return { type: "boolean", nullable };
  if (schema instanceof z.ZodNumber && schema.minValue !== null && schema.maxValue !== null) {
    return { type: "number", nullable, integer: schema.isInt, minimum: schema.minValue, maximum: schema.maxValue };
  }
  throw new Error(`setting ${group}.${key} is neither a boolean nor a bounded number`);
}

/** The settings the cross-field rule ties: resolved together in JavaScript, never read in SQL. */
export const BAND_RULE_KEYS: readonly string[] = ["contradictionBandMin", "factDedupThreshold"];

/**
 * Checks the merged result for what single-field bounds cannot see: the dedup threshold is the
 * top of the contradiction band, so the band's floor may not exceed it.
 */
export function crossFieldIssues(
  settings: Settings,
  /** The pair's keys a change set, each named by an issue of its own (none: the band's floor). */
  changed: readonly string[] = [],
): z.core.$ZodIssue[] {
  const { contradictionBandMin, factDedupThreshold } = settings.semantic;
  if (contradictionBandMin <= factDedupThreshold) return [];
  const named = changed.filter((key) => BAND_RULE_KEYS.includes(key));
  return (named.length > 0 ? named : ["contradictionBandMin"]).map((key) => ({
    code: "custom" as const,
    path: ["semantic", key],
    message:
      key === "factDedupThreshold"
        ? "factDedupThreshold must not be below contradictionBandMin (it is the top of the contradiction band)"
        : "contradictionBandMin must not exceed factDedupThreshold (the top of the contradiction band)",
    input: key === "factDedupThreshold" ? factDedupThreshold : contradictionBandMin,
  }));
}

import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  date,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  real,
  text,
  uniqueIndex,
} from "drizzle-orm/pg-core";
import { MESSAGE_ROLES } from "../roles";
import { createdAt, embedding, timestamptz, tsvector, updatedAt } from "./columns";
import type { ExtractionReport } from "./extraction-report";

// ---------------------------------------------------------------------------------------------
// Tenancy and credentials
// ---------------------------------------------------------------------------------------------

export const projects = pgTable(
  "projects",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    /**
     * `lower(btrim(name))`, unique: no two projects share a name, compared trimmed and
     * case-insensitively (lib/projects.ts, createProject). Null only on a project that repeated
     * an older project's name before names were unique (migration 0036 kept both, keying the
     * oldest); createProject checks those names in its statement too.
     */
    nameKey: text("name_key"),
    /** Partial settings object, deep-merged over the built-in defaults at read time. */
    settings: jsonb("settings").$type<Record<string, unknown>>().notNull().default({}),
    /**
     * When the stored `usage.monthlyTokenBudget` last changed (null: never since migration 0044).
     * A month that ended before it is not announced spent against a budget it never had
     * (lib/usage/budget.ts, raiseBudgetAlerts).
     */
    budgetChangedAt: timestamptz("budget_changed_at"),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("projects_name_key_idx").on(t.nameKey)],
);

export const users = pgTable("users", {
  id: text("id").primaryKey(),
  username: text("username").notNull().unique(),
  passwordHash: text("password_hash").notNull(),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
});

export const sessions = pgTable(
  "sessions",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull().unique(),
    // SET NULL rather than CASCADE: a deleted user's session must answer "Session user no longer exists".
    userId: text("user_id").references(() => users.id, { onDelete: "set null" }),
    createdAt: createdAt(),
    expiresAt: timestamptz("expires_at").notNull(),
    lastUsedAt: timestamptz("last_used_at"),
    revokedAt: timestamptz("revoked_at"),
  },
  (t) => [index("sessions_user_idx").on(t.userId)],
);

/**
 * Failed password checks per username (a sign-in's name as typed, trimmed; a password change's
 * current password), for their throttle (lib/login-throttle.ts). A row per name tried, known or
 * not; a sign-in that succeeds, a new password and the sweep (a day after the last failure)
 * delete it.
 */
export const loginFailures = pgTable("login_failures", {
  username: text("username").primaryKey(),
  failures: integer("failures").notNull(),
  lastFailureAt: timestamptz("last_failure_at").notNull(),
});

export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    keyPreview: text("key_preview").notNull(),
    // Nullable so an orphaned key can be told apart ("API key is not linked to a project").
    projectId: text("project_id").references(() => projects.id, { onDelete: "cascade" }),
    createdAt: createdAt(),
    lastUsedAt: timestamptz("last_used_at"),
    revokedAt: timestamptz("revoked_at"),
  },
  (t) => [index("api_keys_project_idx").on(t.projectId, t.createdAt)],
);

/** A table of keyword statistics per dataset (fact_terms, message_terms): same columns, same key. */
function termStatistics<N extends string>(name: N) {
  return pgTable(
    name,
    {
      projectId: text("project_id")
        .notNull()
        .references(() => projects.id, { onDelete: "cascade" }),
      dataset: text("dataset").notNull(),
      term: text("term").notNull(),
      docs: bigint("docs", { mode: "number" }).notNull(),
      lexemes: bigint("lexemes", { mode: "number" }).notNull(),
    },
    (t) => [primaryKey({ columns: [t.projectId, t.dataset, t.term] })],
  );
}

// ---------------------------------------------------------------------------------------------
// Working memory
// ---------------------------------------------------------------------------------------------

export const threads = pgTable(
  "threads",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    dataset: text("dataset").notNull(),
    tags: text("tags").array().notNull().default(sql`'{}'::text[]`),
    /** Creation-time override `{episodic: {...}}`, null and undefined values already stripped. */
    settings: jsonb("settings").$type<Record<string, unknown>>().notNull().default({}),
    /** Last sequence number handed out; bumped in the same statement that inserts a message. */
    lastSeq: integer("last_seq").notNull().default(0),
    /** Highest sequence number already covered by an episode: messages above it are new. */
    episodeSeq: integer("episode_seq").notNull().default(0),
    /**
     * Messages not yet in an episode (`last_seq > episode_seq`), kept by Postgres, for the index
     * below. An index over `last_seq` itself would make every append a non-HOT update (a new entry
     * in each of the table's indexes); this flag changes only when the thread's first new message
     * comes and when an episode is cut, so appends in between stay HOT.
     */
    episodeDue: boolean("episode_due").generatedAlwaysAs(sql`last_seq > episode_seq`),
    /**
     * Highest sequence number folded by compaction: every message at or below it is compacted,
     * and a compaction lands only if this is still what it read (so two never fold a row twice).
     */
    compactedSeq: integer("compacted_seq").notNull().default(0),
    /**
     * Sequence number up to which every indexed message is counted into the keyword statistics
     * and has its vector: the thread's `message-embed` job reads above it only, so its cost
     * follows what is new, not the thread's length (lib/evidence/embed.ts).
     */
    embeddedSeq: integer("embedded_seq").notNull().default(0),
    /** Un-compacted, non-summary messages: kept by the statements that change it, never counted. */
    liveCount: integer("live_count").notNull().default(0),
    /**
     * `liveCount` when an inline auto-compaction last failed (null since the last compaction): the
     * next inline attempt waits for a threshold more messages (lib/working/compaction.ts).
     */
    compactFailedCount: integer("compact_failed_count"),
    /**
     * Compaction summaries among the thread's sequence numbers (one per compaction): the messages
     * written are `last_seq - summary_count`, read without counting rows.
     */
    summaryCount: integer("summary_count").notNull().default(0),
    lastMessageAt: timestamptz("last_message_at"),
    endedAt: timestamptz("ended_at"),
    /**
     * The trigger and time of the thread's latest cut that made an episode, on the thread's row so
     * that a cut waiting for the row's lock reads the one that took it first (its episode is not in
     * the waiting statement's snapshot): what tells a repeated end from the first end after a timer.
     */
    lastCutTrigger: text("last_cut_trigger"),
    lastCutAt: timestamptz("last_cut_at"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index("threads_project_dataset_idx").on(t.projectId, t.dataset, t.createdAt),
    index("threads_project_created_idx").on(t.projectId, t.createdAt),
    // Threads with messages not yet in an episode: the sweep's sleep-time backstop and a new
    // thread's pull-forward of its siblings read these, not every thread (lib/episodic/triggers.ts).
    index("threads_episode_due_idx").on(t.projectId, t.dataset).where(sql`episode_due`),
  ],
);

export const messages = pgTable(
  "messages",
  {
    id: text("id").primaryKey(),
    // No foreign key of its own: messages cascade with their thread (which cascades with the
    // project), and a second FK check on every append is measurable on the hot path.
    projectId: text("project_id").notNull(),
    threadId: text("thread_id")
      .notNull()
      .references(() => threads.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    role: text("role", { enum: MESSAGE_ROLES }).notNull(),
    content: text("content").notNull(),
    tokens: jsonb("tokens").$type<{ input?: number; output?: number; total?: number }>(),
    model: text("model"),
    latencyMs: real("latency_ms"),
    metadata: jsonb("metadata").$type<{ stopReason?: string; agentName?: string }>(),
    /** True for the summary message written by compaction. */
    isSummary: boolean("is_summary").notNull().default(false),
    /** For a summary message: the sequence range it folds. */
    summaryFromSeq: integer("summary_from_seq"),
    summaryToSeq: integer("summary_to_seq"),
    compactedAt: timestamptz("compacted_at"),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("messages_thread_seq_idx").on(t.threadId, t.seq),
    // Finds a thread's active summary without walking its messages (summaries are few).
    index("messages_summary_idx").on(t.threadId, t.seq).where(sql`${t.isSummary}`),
    // The un-compacted messages, for prepare's window: a long compacted history is not in this
    // index at all, so the window costs the same on any thread.
    index("messages_live_idx").on(t.threadId, t.seq).where(sql`${t.compactedAt} IS NULL AND NOT ${t.isSummary}`),
  ],
);

/** The columns of a message's index rows: the message, its project, thread and dataset, its time. */
const messageIndexColumns = () => ({
  messageId: text("message_id").primaryKey(),
  projectId: text("project_id").notNull(),
  threadId: text("thread_id")
    .notNull()
    .references(() => threads.id, { onDelete: "cascade" }),
  dataset: text("dataset").notNull(),
  createdAt: timestamptz("created_at").notNull(),
});

/**
 * Recall's keyword index of messages (lib/evidence): one row per indexed message (the user's, and
 * the assistant's where the project says so), written by the statement that inserts the message,
 * so a message is searchable when its 201 comes back. Its own table rather than columns of
 * `messages`: the dataset and the index stay off the hot table's rows, and a message's row is never
 * rewritten (an index row is updated once, by its `terms_counted`). Cascades with the thread (one
 * delete per thread, not per message, so the statistics trigger runs once a thread).
 */
export const messageSearch = pgTable(
  "message_search",
  {
    ...messageIndexColumns(),
    /** The same English configuration as facts' `search`, over the message's head (MESSAGE_INDEX_CHARS). */
    search: tsvector("search").notNull(),
    /**
     * Whether the row's terms are in message_terms: false when written, set true by the thread's
     * `message-embed` job in the statement that adds them (lib/evidence/terms.ts); the delete
     * trigger subtracts only the rows that read true. Off the write path, so an append does not
     * pay for the statistics' upsert.
     */
    termsCounted: boolean("terms_counted").notNull().default(false),
  },
  (t) => [
    index("message_search_dataset_idx").on(t.projectId, t.dataset, t.createdAt),
    index("message_search_thread_idx").on(t.threadId),
    index("message_search_search_idx").using("gin", t.search).with({ gin_pending_list_limit: 64 }),
  ],
);

/**
 * Keyword statistics per dataset for messages' BM25, as fact_terms is for facts, but counted off
 * the write path: added by the thread's `message-embed` job (lib/evidence/terms.ts), subtracted by
 * a statement trigger on message_search for the rows it had counted
 * (migrations/0019_message_terms_counted.sql). Recall reads a term not yet counted as held by no
 * message (lib/recall/keyword.ts).
 */
export const messageTerms = termStatistics("message_terms");

/**
 * An indexed message's embedding, written by the thread's `message-embed` job (inserted once,
 * never updated: no dead rows for a database without autovacuum). HNSW index per configured size
 * (lib/db/vector-indexes.ts).
 */
export const messageVectors = pgTable(
  "message_vectors",
  {
    ...messageIndexColumns(),
    embedding: embedding("embedding").notNull(),
  },
  (t) => [
    index("message_vectors_thread_idx").on(t.threadId),
    // A small dataset's vectors, read whole by recall instead of the HNSW index (MESSAGE_SCAN_MAX).
    index("message_vectors_dataset_idx").on(t.projectId, t.dataset, t.createdAt),
  ],
);

// ---------------------------------------------------------------------------------------------
// Episodic memory
// ---------------------------------------------------------------------------------------------

export const episodeStatuses = ["pending", "processing", "completed", "failed", "archived", "deleted"] as const;
export const semanticStatuses = ["pending", "processing", "completed", "failed", "skipped"] as const;

export const episodes = pgTable(
  "episodes",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    // No foreign key: episodes are memory of the dataset and outlive the thread's rows.
    threadId: text("thread_id").notNull(),
    dataset: text("dataset").notNull(),
    status: text("status", { enum: episodeStatuses }).notNull().default("pending"),
    semanticStatus: text("semantic_status", { enum: semanticStatuses }).notNull().default("pending"),
    summary: text("summary").notNull().default(""),
    keyLearnings: jsonb("key_learnings").$type<string[]>().notNull().default([]),
    messageCount: integer("message_count").notNull().default(0),
    tokenCount: integer("token_count"),
    /** Sequence range of the thread's messages this episode covers. */
    fromSeq: integer("from_seq").notNull(),
    toSeq: integer("to_seq").notNull(),
    startedAt: timestamptz("started_at").notNull(),
    endedAt: timestamptz("ended_at").notNull(),
    processingStartedAt: timestamptz("processing_started_at"),
    processingCompletedAt: timestamptz("processing_completed_at"),
    /**
     * The claim stamp of the run of the episode's job that owns its current stage (summary or fact
     * extraction): the time its job was claimed, written by the stage's claim. The job row's lease
     * is the only lease; every later write of the stage requires this stamp, so a run that outlived
     * its lease (and whose job was claimed again) writes nothing.
     */
    claimedAt: timestamptz("claimed_at"),
    error: text("error"),
    retryCount: integer("retry_count").notNull().default(0),
    semanticRetryCount: integer("semantic_retry_count").notNull().default(0),
    semanticError: text("semantic_error"),
    /** What the last completed fact extraction proposed, kept and dropped; null before it ran. */
    extractionReport: jsonb("extraction_report").$type<ExtractionReport>(),
    metadata: jsonb("metadata").$type<Record<string, unknown>>(),
    embedding: embedding("embedding"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index("episodes_dataset_ended_idx").on(t.projectId, t.dataset, t.status, t.endedAt),
    index("episodes_thread_idx").on(t.threadId, t.toSeq),
    index("episodes_retry_idx").on(t.status, t.updatedAt),
    // The sweep's retry of failed fact extractions (lib/semantic/jobs.ts): the few failed rows
    // among every completed episode, without reading the others each sweep.
    index("episodes_extraction_retry_idx")
      .on(t.updatedAt)
      .where(sql`status = 'completed' AND semantic_status = 'failed'`),
  ],
);

// ---------------------------------------------------------------------------------------------
// Semantic memory
// ---------------------------------------------------------------------------------------------

export const entityTypes = ["PERSON", "ORG", "PLACE", "PRODUCT", "EVENT", "CONCEPT", "OTHER"] as const;

export const entities = pgTable(
  "entities",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    dataset: text("dataset").notNull(),
    name: text("name").notNull(),
    type: text("type").notNull(),
    embedding: embedding("embedding"),
    /**
     * The name as recall matches it against a query's words: lower case, every run of characters
     * other than letters and digits as one space ("Node.js" -> "node js"). Computed by the
     * database from the same expression recall applies to the query, so the two always agree.
     */
    matchKey: text("match_key")
      .notNull()
      .generatedAlwaysAs(sql`btrim(regexp_replace(lower(name), '[^[:alnum:]]+', ' ', 'g'))`),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex("entities_name_idx").on(t.projectId, t.dataset, t.type, sql`lower(${t.name})`),
    // Recall's lookup of a query's phrases (lib/recall/retrieve.ts): the match key first, the
    // tenant's keys as expressions that only this lookup writes, so that no plan can serve it by
    // reading the dataset's range of the index above instead (one that guessed the dataset small
    // read a large one's 20,000 entities for each recall).
    index("entities_match_key_idx").on(t.matchKey, sql`(${t.projectId} || '')`, sql`(${t.dataset} || '')`),
  ],
);

export const facts = pgTable(
  "facts",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    dataset: text("dataset").notNull(),
    episodeId: text("episode_id"),
    subject: text("subject").notNull(),
    predicate: text("predicate").notNull(),
    object: text("object").notNull(),
    objectIsEntity: boolean("object_is_entity").notNull().default(false),
    confidence: real("confidence").notNull(),
    sourceQuote: text("source_quote").notNull(),
    validAt: timestamptz("valid_at").notNull(),
    validUntil: timestamptz("valid_until"),
    invalidAt: timestamptz("invalid_at"),
    /**
     * Set with `invalidAt` when the fact was deleted through the API (forgotten), not superseded:
     * it leaves retrieval at every `asOf` too, where a superseded fact stays in the past it held.
     */
    forgottenAt: timestamptz("forgotten_at"),
    embedding: embedding("embedding"),
    search: tsvector("search").generatedAlwaysAs(
      sql`to_tsvector('english', subject || ' ' || predicate || ' ' || object || ' ' || source_quote)`,
    ),
    createdAt: createdAt(),
  },
  (t) => [
    index("facts_dataset_valid_idx").on(t.projectId, t.dataset, t.validAt),
    index("facts_episode_idx").on(t.episodeId),
    // The keyword search reads the GIN index's pending list (new entries not yet merged) whole on
    // every lookup; PGlite runs no autovacuum to merge it, so it stays small (64 kB, not 4 MB).
    index("facts_search_idx").using("gin", t.search).with({ gin_pending_list_limit: 64 }),
  ],
);

/**
 * Keyword statistics per dataset for BM25: how many facts hold each search term (`docs`), and in
 * the row whose term is '' the number of facts and the sum of their search lengths (`lexemes`).
 * Kept by statement triggers on facts (migrations/0011_fact_terms.sql), so the writers do not
 * know about it and a recall reads only its query's terms.
 */
export const factTerms = termStatistics("fact_terms");

/** Which entities a fact touches (its subject or object), for anchor retrieval. */
export const factEntities = pgTable(
  "fact_entities",
  {
    factId: text("fact_id")
      .notNull()
      .references(() => facts.id, { onDelete: "cascade" }),
    entityId: text("entity_id")
      .notNull()
      .references(() => entities.id, { onDelete: "cascade" }),
  },
  (t) => [primaryKey({ columns: [t.factId, t.entityId] }), index("fact_entities_entity_idx").on(t.entityId)],
);

// ---------------------------------------------------------------------------------------------
// Background work
// ---------------------------------------------------------------------------------------------

export const jobs = pgTable(
  "jobs",
  {
    id: text("id").primaryKey(),
    kind: text("kind").notNull(),
    /** Natural key (e.g. `idle:<threadId>`): scheduling is an upsert on it. */
    key: text("key").notNull().unique(),
    projectId: text("project_id").references(() => projects.id, { onDelete: "cascade" }),
    dataset: text("dataset"),
    runAt: timestamptz("run_at").notNull(),
    attempts: integer("attempts").notNull().default(0),
    lockedUntil: timestamptz("locked_until"),
    payload: jsonb("payload").$type<Record<string, unknown>>().notNull().default({}),
    lastError: text("last_error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index("jobs_due_idx").on(t.runAt), index("jobs_dataset_idx").on(t.projectId, t.dataset, t.kind)],
);

// ---------------------------------------------------------------------------------------------
// Idempotency keys (the `Idempotency-Key` header on /v1 writes; lib/idempotency.ts)
// ---------------------------------------------------------------------------------------------

export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The header's value as sent (1-255 printable ASCII characters). */
    key: text("key").notNull(),
    /** SHA-256 of the method, the path with its query and the body: a different request is a 422. */
    fingerprint: text("fingerprint").notNull(),
    /** Who holds the key: the store and the release of a request apply only to its own claim. */
    claimId: text("claim_id").notNull(),
    /** While the first request runs (no response yet): its lease, renewed as it runs. */
    lockedUntil: timestamptz("locked_until"),
    /** The stored answer; null while the first request runs. */
    responseStatus: integer("response_status"),
    responseBody: text("response_body"),
    responseContentType: text("response_content_type"),
    /**
     * The datasets the request named, directly or through the thread or episode in its path
     * (lib/idempotency.ts `answerScope`): erasing one deletes the answers that may quote it.
     */
    datasets: text("datasets").array(),
    /**
     * When the running request wrote before it could fail (chat stores the user's message before
     * its model call). A request taking over the claim after the holder died answers as the
     * holder would have on failing (its kept 5xx) instead of writing again.
     */
    wroteAt: timestamptz("wrote_at"),
    createdAt: createdAt(),
    /** After this the key is free again (a repeat runs anew) and the sweep deletes the row. */
    expiresAt: timestamptz("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.key] }), index("idempotency_keys_expires_idx").on(t.expiresAt)],
);

// ---------------------------------------------------------------------------------------------
// Webhooks (lib/webhooks): endpoints, one delivery per event and endpoint, one row per attempt
// ---------------------------------------------------------------------------------------------

export const webhookEndpoints = pgTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    /** `whsec_` + base64 of 24 random bytes: it signs every delivery, so it is kept as is (shown once). */
    secret: text("secret").notNull(),
    /**
     * The secret the last rotation replaced: until `previousSecretExpiresAt` (a day after the
     * rotation) every attempt is signed with it too, so receivers switch at their own pace. Left
     * in place once expired (it signs nothing then); the next rotation overwrites it.
     */
    previousSecret: text("previous_secret"),
    previousSecretExpiresAt: timestamptz("previous_secret_expires_at"),
    /** The event types delivered here (a JSON array of strings). */
    eventTypes: jsonb("event_types").$type<string[]>().notNull(),
    createdAt: createdAt(),
    /**
     * The first failed attempt of the current streak (cleared by a success). The streak is over
     * once no attempt has failed for STREAK_GAP_MS (lib/webhooks/deliver.ts): `lastFailedAt`.
     */
    failingSince: timestamptz("failing_since"),
    lastFailedAt: timestamptz("last_failed_at"),
    /** Set when the endpoint failed for a day; nothing is delivered until it is enabled again. */
    disabledAt: timestamptz("disabled_at"),
    disabledReason: text("disabled_reason"),
  },
  (t) => [index("webhook_endpoints_project_idx").on(t.projectId, t.createdAt)],
);

export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    /** `msg_…`: the `webhook-id` header, the same on every attempt and replay. */
    id: text("id").primaryKey(),
    endpointId: text("endpoint_id")
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    eventType: text("event_type").notNull(),
    /** The body sent: `{type, timestamp, data}`. */
    payload: jsonb("payload").$type<Record<string, unknown>>().notNull(),
    /** pending (attempts left), succeeded, failed (a day of failures, or its endpoint disabled). */
    status: text("status").notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamptz("next_attempt_at"),
    /** No retry after this (a day after the event, or after a replay); one not attempted by then is attempted once. */
    retryUntil: timestamptz("retry_until").notNull(),
    lastStatusCode: integer("last_status_code"),
    lastError: text("last_error"),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index("webhook_deliveries_endpoint_idx").on(t.endpointId, t.createdAt),
    // The sweep's deletion of finished deliveries past WEBHOOK_RETENTION_DAYS (lib/webhooks/retention.ts),
    // oldest first, without reading the kept ones. A failed attempt leaves both columns as they
    // were, so its update stays HOT.
    index("webhook_deliveries_retention_idx").on(t.retryUntil).where(sql`status <> 'pending'`),
    // The dashboard's endpoint list (lib/webhooks/endpoints.ts): each endpoint's last attempted
    // delivery, and its pending ones (count, next attempt), read without its other deliveries.
    index("webhook_deliveries_last_attempt_idx").on(t.endpointId, t.updatedAt, t.id).where(sql`attempts > 0`),
    index("webhook_deliveries_pending_idx").on(t.endpointId, t.nextAttemptAt).where(sql`status = 'pending'`),
    // A dataset's erase deletes the deliveries whose event names it (lib/recall/dataset.ts) without
    // reading every other delivery kept for WEBHOOK_RETENTION_DAYS. The payload never changes, so
    // an attempt's update stays as HOT as before.
    index("webhook_deliveries_dataset_idx").on(t.projectId, sql`(payload -> 'data' ->> 'dataset')`),
  ],
);

export const webhookAttempts = pgTable(
  "webhook_attempts",
  {
    id: text("id").primaryKey(),
    deliveryId: text("delivery_id")
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    attemptedAt: timestamptz("attempted_at").notNull(),
    /** The HTTP status; null when no answer came (refused, timeout, network error). */
    statusCode: integer("status_code"),
    error: text("error"),
    durationMs: integer("duration_ms").notNull(),
  },
  (t) => [index("webhook_attempts_delivery_idx").on(t.deliveryId, t.attemptedAt)],
);

// ---------------------------------------------------------------------------------------------
// Usage (lib/usage): one row per provider call, and the budget alerts already raised
// ---------------------------------------------------------------------------------------------

export const usageOutcomes = ["ok", "error", "aborted"] as const;

/**
 * The ledger: every model, embedding and rerank call made for a project, written by the statement
 * that stores the call's result where there is one. Token counts as the provider reported them;
 * null when it reported none (unknown, not zero). Not part of a dataset: erasing a dataset keeps
 * what it cost (the rows keep its name), deleting the project removes them.
 */
export const usageEvents = pgTable(
  "usage_events",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** Null for a call of no dataset. */
    dataset: text("dataset"),
    /** What the call was for (lib/llm/usage.ts USAGE_OPERATIONS). */
    operation: text("operation").notNull(),
    /** chat, embedding or rerank. */
    kind: text("kind").notNull(),
    model: text("model").notNull(),
    inputTokens: integer("input_tokens"),
    outputTokens: integer("output_tokens"),
    totalTokens: integer("total_tokens"),
    outcome: text("outcome", { enum: usageOutcomes }).notNull(),
    createdAt: createdAt(),
  },
  // GET /v1/usage's range is an index range scan (a budget reads usage_month_tokens).
  (t) => [index("usage_events_project_created_idx").on(t.projectId, t.createdAt)],
);

/**
 * The tokens each project's calls reported per calendar month (UTC), kept by triggers on
 * usage_events (migrations/0028_usage_month_tokens.sql; since 0040_usage_days.sql, the trigger
 * that keeps usage_days adds to it too), so that a budget check reads a few rows
 * instead of the month's ledger. Split in up to 16 rows by the writing connection
 * (pg_backend_pid() % 16): on a server, concurrent statements of one project mostly add to
 * different rows, instead of waiting for each other's commit at one. Unknown counts (null) add
 * nothing, as in the ledger's sums.
 */
export const usageMonthTokens = pgTable(
  "usage_month_tokens",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The month's first instant, UTC. */
    month: timestamptz("month").notNull(),
    shard: integer("shard").notNull(),
    tokens: bigint("tokens", { mode: "number" }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.month, t.shard] })],
);

/**
 * The ledger summed per project, UTC day, dataset, operation and model, kept by triggers on
 * usage_events (migrations/0040_usage_days.sql), so that a usage read over whole days reads these
 * rows instead of every call (GET /v1/usage and the dashboard's usage page: 0.9-3.6 s at a million
 * calls on the embedded database, 0.1-0.3 s from these). Split in up to 4 rows by the writing connection (pg_backend_pid() % 4), as
 * usage_month_tokens is by 16: the key is finer here (a dataset, an operation), so concurrent
 * statements meet at one row less often. A key's rows may sum to zero calls after a prune.
 */
export const usageDays = pgTable(
  "usage_days",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The calls' UTC calendar day. */
    day: date("day", { mode: "string" }).notNull(),
    /** '' for calls of no dataset (a dataset's name has at least one character). */
    dataset: text("dataset").notNull(),
    operation: text("operation").notNull(),
    model: text("model").notNull(),
    shard: integer("shard").notNull(),
    calls: integer("calls").notNull(),
    /** Sums of the counts the provider reported (unknown ones add nothing, as in the ledger's sums). */
    inputTokens: bigint("input_tokens", { mode: "number" }).notNull(),
    outputTokens: bigint("output_tokens", { mode: "number" }).notNull(),
    totalTokens: bigint("total_tokens", { mode: "number" }).notNull(),
    /** Calls whose provider reported no total. */
    unknownCalls: integer("unknown_calls").notNull(),
    /** Calls whose outcome was not ok. */
    failedCalls: integer("failed_calls").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.day, t.dataset, t.operation, t.model, t.shard] })],
);

/** One row per project and month whose budget ran out: the usage.budget_exhausted event fires once. */
export const usageBudgetAlerts = pgTable(
  "usage_budget_alerts",
  {
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The first day of the month (UTC), as YYYY-MM-01. */
    month: text("month").notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.month] })],
);

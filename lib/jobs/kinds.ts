import { type SQL, sql } from "drizzle-orm";

/**
 * Every kind of background job: the prefix of its key and the payload field naming its subject
 * (the row it works on). A job's key is `<prefix>:<subject>`, so there is at most one job per
 * kind and subject, and scheduling is an upsert on the key. The JS and SQL forms of a key
 * ({@link jobKey}, {@link jobKeySql}) come from this one table.
 */
export const JOB_KINDS = {
  /** The idle timer of a thread: cuts an episode once the thread has been quiet long enough. */
  "thread-idle": { prefix: "idle", subject: "threadId" },
  /**
   * An episode's background work, the one owner of it: runs whichever stage is pending (embed
   * the thread's messages, summarise, extract facts) under the job's lease (lib/pipeline).
   */
  episode: { prefix: "episode", subject: "episodeId" },
  /** Embeds a thread's indexed messages not yet embedded (debounced after its writes). */
  "message-embed": { prefix: "embed", subject: "threadId" },
  /** One attempt of one webhook delivery. */
  webhook: { prefix: "webhook", subject: "deliveryId" },
} as const satisfies Record<string, { prefix: string; subject: string }>;

export type JobKind = keyof typeof JOB_KINDS;

export function isJobKind(kind: string): kind is JobKind {
  return Object.hasOwn(JOB_KINDS, kind);
}

/** The key of the job of `kind` for `subject`, e.g. `episode:epi_…`. */
export function jobKey(kind: JobKind, subject: string): string {
  return `${JOB_KINDS[kind].prefix}:${subject}`;
}

/** The same key in SQL, over an expression naming the subject (e.g. `'episode:' || ep.id`). */
export function jobKeySql(kind: JobKind, subject: SQL): SQL {
  // A constant of the table above, written inline so the statement reads as before (and plans alike).
  return sql`${sql.raw(`'${JOB_KINDS[kind].prefix}:'`)} || ${subject}`;
}

/** The subject a job's payload names (the episode, thread or delivery), or undefined. */
export function jobSubject(job: { kind: string; payload: Record<string, unknown> }): string | undefined {
  if (!isJobKind(job.kind)) return undefined;
  const value = job.payload[JOB_KINDS[job.kind].subject];
  return typeof value === "string" ? value : undefined;
}

/**
 * The two lanes jobs run in, each with slots of its own: webhook deliveries wait on their
 * receivers (up to WEBHOOK_TIMEOUT_MS an attempt), everything else on the model provider. A
 * receiver that hangs then holds webhook slots only, never a summary, an extraction or a thread's
 * message embeddings.
 */
export type JobLane = "work" | "webhooks";
export const JOB_LANES: readonly JobLane[] = ["work", "webhooks"];

export function laneOfKey(key: string): JobLane {
  return key.startsWith(`${JOB_KINDS.webhook.prefix}:`) ? "webhooks" : "work";
}

/** The lane's jobs, as a condition on the jobs table's `kind`. */
export function laneSql(lane: JobLane): SQL {
  return lane === "webhooks" ? sql`kind = 'webhook'` : sql`kind <> 'webhook'`;
}

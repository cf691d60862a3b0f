import type { AcceptedKeys } from "./accepted-keys";
import type { Clock } from "./clock";
import type { Config } from "./config";
import type { Database, Db } from "./db/types";
import type { Doorbell } from "./jobs/doorbell";
import type { JobRegistry } from "./jobs/registry";
import type { LaneSlots } from "./jobs/slots";
import type { Llm } from "./llm/client";
import type { QueryEmbeddings } from "./llm/query-embeddings";
import type { Logger } from "./log";
import type { UsageBacklog } from "./usage/backlog";

/** Everything a domain function may touch, injected by the host. */
export interface Deps {
  db: Db;
  database: Database;
  config: Config;
  clock: Clock;
  log: Logger;
  llm: Llm;
  /** Makes a scheduled job run on time (timers on Node.js, QStash on the edge). */
  doorbell: Doorbell;
  /** What runs each kind of job, and the sweep's backstops (lib/background.ts). */
  jobs: JobRegistry;
  /**
   * Work that must finish but not delay the response (the Worker's `waitUntil`; on Node.js the
   * promise simply runs on). Failures are logged by the caller.
   */
  defer(work: Promise<unknown>): void;
  /** Recall's query embeddings, kept for the life of the process (Node.js) or isolate (edge). */
  queryEmbeddings: QueryEmbeddings;
  /** Ledger rows waiting for a statement to carry them, kept like queryEmbeddings (lib/usage/backlog.ts). */
  usageBacklog: UsageBacklog;
  /** API keys accepted lately, kept like queryEmbeddings (lib/accepted-keys.ts). */
  acceptedKeys: AcceptedKeys;
  /**
   * Job slots, JOB_CONCURRENCY of them per lane (model work, webhook deliveries). Node.js: the
   * process's, which the doorbell's jobs and the sweep's take alike, so no more run at once (the
   * provider or the receivers, not the CPU, are the bound). The edge: an invocation's (a cron
   * sweep's), as workerd allows no invocation to wait on another. Closed when the Node.js host
   * shuts down: jobs waiting for a slot then never start.
   */
  jobSlots: LaneSlots;
}

/**
 * What a verb over plain rows needs (users, projects, API keys): the admin command line opens a
 * database and a clock, not a whole service.
 */
export type DbDeps = Pick<Deps, "db" | "clock">;

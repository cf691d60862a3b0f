import { deleteStaleLoginFailures, deleteStaleSessions } from "./auth";
import { episodicBackstops, idleTimerJob } from "./episodic/jobs";
import { messageEmbedJob } from "./evidence/embed";
import { deleteExpiredKeyBacklog, EXPIRED_KEY_BATCHES } from "./idempotency";
import type { JobRegistry } from "./jobs/registry";
import { episodeJob } from "./pipeline/stages";
import { requeueFailedExtractions } from "./semantic/jobs";
import { raiseBudgetAlerts } from "./usage/budget";
import { webhookJob } from "./webhooks/jobs";
import { deleteExpiredDeliveryBacklog, EXPIRED_DELIVERY_BATCHES } from "./webhooks/retention";

/**
 * The service's background work, put together here (the hosts pass it in their Deps): each
 * folder owns its job kinds and backstops, lib/jobs runs them and imports none of those folders.
 * A new job kind: add it to JOB_KINDS (lib/jobs/kinds.ts), schedule it with scheduleJobsSql
 * (lib/jobs/schedule.ts) and give it a handler here; the compiler asks for the handler.
 */
export const backgroundJobs: JobRegistry = {
  handlers: {
    // One job per episode, one lease: its stages (embed, summarise, extract facts) in one run.
    episode: episodeJob,
    "message-embed": messageEmbedJob,
    "thread-idle": idleTimerJob,
    webhook: webhookJob,
  },
  // In this order each sweep (the names are the sweep report's and its log line's fields). Retry
  // policies and lost timers only: work a dead worker left keeps its job, claimed again past its lease.
  backstops: {
    retried: episodicBackstops.retried,
    retriedExtractions: (deps) => requeueFailedExtractions(deps),
    backstop: episodicBackstops.backstop,
    // A project's monthly token budget spent: its usage.budget_exhausted event, once a month.
    budgetAlerts: raiseBudgetAlerts,
  },
  // After the due jobs, in this order (docs/operations.md, "Retention").
  cleanups: {
    expiredKeys: (deps) => deleteExpiredKeyBacklog(deps, EXPIRED_KEY_BATCHES),
    expiredDeliveries: (deps) => deleteExpiredDeliveryBacklog(deps, EXPIRED_DELIVERY_BATCHES),
    staleSessions: deleteStaleSessions,
    staleLoginFailures: deleteStaleLoginFailures,
  },
};

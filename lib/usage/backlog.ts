import type { UsageEvent } from "../llm/usage";

/**
 * How long a request's leftover ledger rows wait for another request's statement to carry them
 * before they are written by a statement of their own. Under traffic the next API key check, a
 * few milliseconds later, takes them; an idle host pays one statement for all that waited.
 * Well inside the Worker's `waitUntil` allowance (30 s after the response).
 */
export const USAGE_CARRY_MS = 2000;

/**
 * A carrying statement that failed this many times drops its rows (logged) rather than give them
 * back again: ledger rows must never keep failing the requests that carry them.
 */
export const USAGE_CARRY_ATTEMPTS = 3;

/** Whose calls they were, as plain values (a backlog holds no SQL). */
export interface UsageOwner {
  projectId: string;
  dataset: string | null;
}

/** A provider call waiting for a statement, with whose call it was and when it ended. */
export interface CarriedUsage extends UsageEvent, UsageOwner {
  at: string;
  /** Carrying statements that failed with it so far. */
  attempts: number;
}

/**
 * The provider calls a request made after its last statement (the reranker and synthesis after
 * recall's one statement; a chat call that failed, with no reply to store): kept by the process
 * (on the edge, the isolate) for the next statement that can carry them, the API key check that
 * leads every `/v1` request (lib/auth.ts), so that recording them costs no statement of its own.
 * Whatever no request carried within USAGE_CARRY_MS is written by the `flushLater` the request
 * deferred. Plain data only: a Worker may not share I/O objects between requests.
 */
export interface UsageBacklog {
  add(events: UsageEvent[], owner: UsageOwner, at: string): void;
  /** Every waiting call, oldest first; taking them empties the backlog. */
  take(): CarriedUsage[];
  /**
   * Calls whose carrying statement failed wait again, first; those that failed
   * USAGE_CARRY_ATTEMPTS times are returned instead, dropped.
   */
  giveBack(calls: CarriedUsage[]): CarriedUsage[];
  readonly pending: number;
  /**
   * Resolves after `ms`, or at once when `hurry()` is called meanwhile (a host shutting down,
   * or a test that wants the ledger now).
   */
  wait(ms: number): Promise<void>;
  hurry(): void;
}

export function usageBacklog(): UsageBacklog {
  let calls: CarriedUsage[] = [];
  const waiting = new Set<() => void>();
  return {
    add(events, owner, at) {
      for (const e of events) calls.push({ ...e, ...owner, at, attempts: 0 });
    },
    take() {
      const taken = calls;
      calls = [];
      return taken;
    },
    giveBack(taken) {
      const failed = taken.map((c) => ({ ...c, attempts: c.attempts + 1 }));
      calls = [...failed.filter((c) => c.attempts < USAGE_CARRY_ATTEMPTS), ...calls];
      return failed.filter((c) => c.attempts >= USAGE_CARRY_ATTEMPTS);
    },
    get pending() {
      return calls.length;
    },
    wait(ms) {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          waiting.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        waiting.add(done);
      });
    },
    hurry() {
      for (const done of [...waiting]) done();
    },
  };
}

import type { Meter } from "../llm/client";
import type { UsageEvent, UsageOperation } from "../llm/usage";

/**
 * The provider calls of one piece of work (a request, or one job run) that are not in the ledger
 * yet. `meter(operation)` goes with each call (the Llm methods take it); the statement that stores
 * the work's result takes the events (`take`) and writes them in a CTE (lib/usage/sql.ts), so
 * recording costs no statement of its own; what no statement took is flushed at the end.
 */
export interface UsageCollector {
  meter(operation: UsageOperation): Meter;
  /** The calls not yet taken, oldest first; taking them empties the collector. */
  take(): UsageEvent[];
  /** Events taken for a statement that then failed (rolled back): they wait again, first. */
  giveBack(events: UsageEvent[]): void;
  /** How many calls wait to be taken. */
  readonly pending: number;
}

export function usageCollector(): UsageCollector {
  let events: UsageEvent[] = [];
  return {
    meter: (operation) => (call) => {
      // The ledger's fields only: a stream's error is for metrics and traces.
      const { error: _error, ...recorded } = call;
      events.push({ ...recorded, operation });
    },
    take() {
      const taken = events;
      events = [];
      return taken;
    },
    giveBack(taken) {
      events = [...taken, ...events];
    },
    get pending() {
      return events.length;
    },
  };
}

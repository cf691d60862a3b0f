import type { QueryHook } from "./types";

/**
 * A statement that must run before a request's work, sent in the same round trip as the work's
 * first statement where the driver can (Neon's HTTP transaction), otherwise just before it on the
 * same database. Used to check an API key inside a read's round trip (lib/auth.ts): the work is
 * scoped by SQL that finds the key's project itself, and `accept` decides the answer from the
 * lead's rows before the work's result is handed back.
 */
export interface LeadingStatement {
  /** Compiled SQL (see `compiled` in lib/db/types.ts): the drivers send it as it is. */
  query: CompiledQuery;
  /**
   * Reads the lead's rows; throwing refuses the request: the work's result is discarded, and
   * every later statement of the request fails with the same error without being sent.
   */
  accept(rows: Record<string, unknown>[]): void;
  /**
   * What the lead writes for others (lib/auth.ts: ledger rows other requests left waiting), which
   * must never fail the request: when a round trip with the lead fails, `giveBack` gets the error
   * (nothing the lead would have written was), and the lead goes on as `bare`, the statement
   * without them, once.
   */
  carried?: { bare: CompiledQuery; giveBack(err: unknown): void };
}

export interface CompiledQuery {
  sql: string;
  params: unknown[];
}

/**
 * The lead's one outcome per request. The first statement to come takes the lead along (`take`
 * returns true: the caller sends both and reports with `settleWith`); statements issued meanwhile,
 * and every later one, wait for that outcome and go alone. `settle()` sends the lead alone when no
 * statement took it (a request that ended, or reached a provider call, before its first statement).
 */
export class LeadGate {
  private outcome: Promise<void> | undefined;
  private report: ((settled: Promise<void>) => void) | undefined;
  private carrying: boolean;

  constructor(
    private readonly lead: LeadingStatement,
    private readonly sendAlone: (query: CompiledQuery) => Promise<Record<string, unknown>[]>,
  ) {
    this.carrying = lead.carried !== undefined;
  }

  /** The statement the lead is now: as given, or bare once a round trip with what it carried failed. */
  get query(): CompiledQuery {
    return this.carrying ? this.lead.query : (this.lead.carried?.bare ?? this.lead.query);
  }

  /**
   * A round trip with the lead failed: if it carried rows for others, they may be what failed
   * it, so they go back and the lead goes bare. True when the caller should try again (once).
   */
  dropCarried(err: unknown): boolean {
    if (!this.carrying) return false;
    this.carrying = false;
    this.lead.carried?.giveBack(err);
    return true;
  }

  /** True for the one caller that must send the lead with its statement. */
  take(): boolean {
    if (this.outcome) return false;
    this.outcome = new Promise<void>((resolve) => {
      this.report = (settled) => resolve(settled);
    });
    return true;
  }

  /** The taker's report: the lead's rows (accepted or refused here), or the failed round trip. */
  settleWith(rows: Record<string, unknown>[]): void {
    this.finish(Promise.resolve().then(() => this.lead.accept(rows)));
  }

  /**
   * The combined round trip failed. The work's error must not hide a refused key (a 401 is the
   * answer to a bad credential, whatever the work did), so the lead is sent alone to tell.
   */
  settleAfterFailure(): Promise<void> {
    const settled = this.sendLeadAlone();
    this.finish(settled);
    return settled;
  }

  /** Waits for the lead's outcome, sending it alone if nobody has yet; throws its refusal. */
  settle(): Promise<void> {
    if (this.take()) this.finish(this.sendLeadAlone());
    return this.outcome as Promise<void>;
  }

  private async sendLeadAlone(): Promise<void> {
    let rows: Record<string, unknown>[];
    try {
      rows = await this.sendAlone(this.query);
    } catch (err) {
      if (!this.dropCarried(err)) throw err;
      rows = await this.sendAlone(this.query);
    }
    this.lead.accept(rows);
  }

  private finish(settled: Promise<void>): void {
    settled.catch(() => {}); // observed by whoever awaits the outcome
    this.report?.(settled);
    this.report = undefined;
  }
}

/**
 * The statement log (`onQuery`) of a driver that sends the lead just before the request's first
 * statement (the embedded database, node-postgres): drizzle logs a statement when it is issued,
 * before the view has sent the lead, so the lead is logged then, ahead of it, and the log keeps the
 * order in which the database runs them. `logLead` is for the lead sent alone; it logs the lead
 * once. The bare lead (sent again after a failure, `carried`) is logged when it goes.
 */
export function leadFirstLog(lead: LeadingStatement, onQuery: QueryHook | undefined) {
  let logged = false;
  const logLead = (query: CompiledQuery = lead.query) => {
    if (query !== lead.query) return onQuery?.(query.sql, query.params);
    if (logged) return;
    logged = true;
    onQuery?.(lead.query.sql, lead.query.params);
  };
  const logger = onQuery
    ? {
        logQuery: (query: string, params: unknown[]) => {
          logLead();
          onQuery(query, params);
        },
      }
    : (false as const);
  return { logLead, logger };
}

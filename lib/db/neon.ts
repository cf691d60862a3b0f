import { neon, neonConfig } from "@neondatabase/serverless";
import { drizzle } from "drizzle-orm/neon-http";
import { withFastCompile } from "./compile";
import { type CompiledQuery, LeadGate, type LeadingStatement } from "./leading";
import * as schema from "./schema";
import { type Database, type Db, type LeadingDatabase, loggerFrom, type QueryHook, requestDatabase } from "./types";

export interface NeonOptions {
  /** Override of the SQL-over-HTTP endpoint (a local proxy in tests and `npm run dev`). */
  fetchEndpoint?: string;
  onQuery?: QueryHook;
}

type NeonClient = ReturnType<typeof neon<false, false>>;
/** The part of Neon's HTTP client drizzle calls, without its result-shape generics. */
interface NeonHttp {
  query(text: string, params?: unknown[], options?: object): Query;
  transaction(queries: Query[], options?: object): Promise<unknown[]>;
}
/** A statement, sent when awaited (or inside a transaction). */
type Query = PromiseLike<unknown>;
type TransactionOptions = object | undefined;
type Rows = { rows: Record<string, unknown>[] };

/** Neon's serverless driver over HTTP: stateless, so one is made per request, never at module scope. */
export function createNeonDatabase(url: string, options: NeonOptions = {}): Database {
  if (options.fetchEndpoint) {
    const endpoint = options.fetchEndpoint;
    neonConfig.fetchEndpoint = () => endpoint;
  }
  const client = neon(url);
  const db = withFastCompile(drizzle({ client, schema, logger: loggerFrom(options.onQuery) }));
  return {
    db: db as unknown as Db,
    kind: "neon",
    batch: (build) => db.batch(build(db as unknown as Db) as never) as Promise<unknown[]>,
    withLeading: (lead) => leadingNeon(client, lead, options.onQuery),
    close: async () => {},
  };
}

/**
 * Over HTTP every statement is a network round trip, so the lead rides in the same HTTP request as
 * the first statement (or batch): one non-interactive transaction, the lead last. Its row locks
 * (an API key check stamps the key's row, and writes other requests' ledger rows) are then held
 * only while the transaction commits: sent first, they were held through the whole read, and
 * every other request with the same key waited for it. Nothing the statements read depends on
 * the lead. Statements are lazy until awaited, which lets a batch's statements be collected and
 * sent with the lead too.
 */
function leadingNeon(neonClient: NeonClient, lead: LeadingStatement, onQuery: QueryHook | undefined): LeadingDatabase {
  const client = neonClient as unknown as NeonHttp;
  const leadQuery = (query: CompiledQuery) => {
    onQuery?.(query.sql, query.params);
    return client.query(query.sql, query.params, { arrayMode: false, fullResults: true });
  };
  const gate = new LeadGate(lead, async (query) => ((await leadQuery(query)) as Rows).rows);

  /**
   * Sends `queries` in one transaction (or `alone` on its own), the lead last if still unsent.
   * A failed transaction whose lead carried rows for others goes again with the bare lead: the
   * rows may be what failed it, and nothing of the first one was written.
   */
  async function send(queries: Query[], options: TransactionOptions, alone?: Query): Promise<unknown[]> {
    if (!gate.take()) {
      await gate.settle();
      return alone ? [await alone] : client.transaction(queries, options);
    }
    let results: unknown[] | undefined;
    while (!results) {
      try {
        results = await client.transaction([...queries, leadQuery(gate.query)], options);
      } catch (err) {
        if (gate.dropCarried(err)) continue;
        await gate.settleAfterFailure();
        throw err;
      }
    }
    gate.settleWith((results[results.length - 1] as Rows).rows);
    await gate.settle();
    return results.slice(0, -1);
  }

  const underlying = new WeakMap<object, Query>();
  const query = (text: string, params?: unknown[], queryOptions?: object) => {
    const real = client.query(text, params, queryOptions);
    const deferred = {
      // biome-ignore lint/suspicious/noThenProperty: a lazy statement, awaited like Neon's own
      then: (ok?: (v: unknown) => unknown, fail?: (e: unknown) => unknown) =>
        send([real], undefined, real)
          .then(([result]) => result)
          .then(ok, fail),
    };
    underlying.set(deferred, real);
    return deferred;
  };
  const transaction = (queries: object[], options?: TransactionOptions) =>
    send(
      queries.map((q) => underlying.get(q) ?? (q as Query)),
      options,
    );
  const view = Object.assign(query, { query, transaction });
  // Without the relational schema (`db.query`, unused here): building it costs ~130 µs a request.
  const db = withFastCompile(drizzle({ client: view as unknown as NeonClient, logger: loggerFrom(onQuery) }));
  return requestDatabase(
    {
      db: db as unknown as Db,
      kind: "neon",
      batch: (build) => db.batch(build(db as unknown as Db) as never) as Promise<unknown[]>,
    },
    gate,
  );
}

export function isNeonUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host.endsWith(".neon.tech") || host.endsWith(".neon.build");
  } catch {
    return false;
  }
}

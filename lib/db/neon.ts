import { neon, neonConfig } from "@neondatabase/serverless";
import { drizzle } from "drizzle-orm/neon-http";
import * as schema from "./schema";
import { type Database, type Db, loggerFrom, type QueryHook } from "./types";

export interface NeonOptions {
  /** Override of the SQL-over-HTTP endpoint (a local proxy in tests and `npm run dev`). */
  fetchEndpoint?: string;
  onQuery?: QueryHook;
}

/** Neon's serverless driver over HTTP: stateless, so one is made per request, never at module scope. */
export function createNeonDatabase(url: string, options: NeonOptions = {}): Database {
  if (options.fetchEndpoint) {
    const endpoint = options.fetchEndpoint;
    neonConfig.fetchEndpoint = () => endpoint;
  }
  const db = drizzle({ client: neon(url), schema, logger: loggerFrom(options.onQuery) });
  return {
    db: db as unknown as Db,
    kind: "neon",
    batch: (build) => db.batch(build(db as unknown as Db) as never) as Promise<unknown[]>,
    close: async () => {},
  };
}

export function isNeonUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host.endsWith(".neon.tech") || host.endsWith(".neon.build");
  } catch {
    return false;
  }
}

import type { Config } from "../config";
import { createNeonDatabase, isNeonUrl } from "./neon";
import { createPgDatabase } from "./pg";
import { createPgliteDatabase } from "./pglite";
import type { Database, QueryHook } from "./types";

/**
 * The Node.js host's driver choice, from DATABASE_URL: unset → embedded PGlite (PGLITE_DIR),
 * a Neon URL (or NEON_FETCH_ENDPOINT set) → Neon over HTTP, anything else → node-postgres.
 */
export async function createDatabase(config: Config, options: { onQuery?: QueryHook } = {}): Promise<Database> {
  const url = config.databaseUrl;
  if (!url)
    return createPgliteDatabase({
      dir: config.pgliteDir,
      durability: config.pgliteDurability,
      sharedBuffers: config.pgliteSharedBuffers,
      onQuery: options.onQuery,
    });
  if (isNeonUrl(url) || config.neonFetchEndpoint) {
    return createNeonDatabase(url, { fetchEndpoint: config.neonFetchEndpoint, onQuery: options.onQuery });
  }
  return createPgDatabase(url, options);
}

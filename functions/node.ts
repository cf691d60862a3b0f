import { bootstrapAdmin } from "../lib/auth";
import { type Clock, systemClock } from "../lib/clock";
import type { Config } from "../lib/config";
import { migrateDatabase } from "../lib/db/migrate";
import { createDatabase } from "../lib/db/node";
import type { Database } from "../lib/db/types";
import type { Deps } from "../lib/deps";
import { consoleLogger, type Logger } from "../lib/log";
import { createApp } from "./app";

export interface NodeServiceOptions {
  config: Config;
  /** An already-open database (tests pass a clone of a migrated template). */
  database?: Database;
  clock?: Clock;
  log?: Logger;
  /** Skip migrations when the database is known to be migrated (test clones). */
  migrate?: boolean;
}

/**
 * The Node.js host's service: one database for the process, migrated and bootstrapped, and the
 * shared app over it.
 */
export async function createNodeService(options: NodeServiceOptions) {
  const { config } = options;
  const database = options.database ?? (await createDatabase(config));
  if (options.migrate !== false) await migrateDatabase(database, config.openai.embeddingDimensions);
  const deps: Deps = {
    db: database.db,
    database,
    config,
    clock: options.clock ?? systemClock,
    log: options.log ?? consoleLogger,
  };
  const admin = await bootstrapAdmin(deps);
  const app = createApp({ deps: () => deps, corsOrigins: config.corsOrigins });
  return {
    app,
    deps,
    admin,
    close: () => database.close(),
  };
}

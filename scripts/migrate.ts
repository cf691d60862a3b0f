import { bootstrapAdmin } from "../lib/auth";
import { systemClock } from "../lib/clock";
import { type Config, parseConfig } from "../lib/config";
import { migrateDatabase } from "../lib/db/migrate";
import { createDatabase } from "../lib/db/node";
import { createLlm } from "../lib/llm/client";
import { checkEmbeddingDimensions, warnIfNoProvider } from "../lib/llm/embedding-check";
import { consoleLogger, errorFields } from "../lib/log";
import { startFailureMessage } from "../lib/start-failure";

/**
 * `npm run db:migrate`: apply the migrations to DATABASE_URL (or the embedded database) and
 * create the admin user on an empty database. The Worker never migrates at request time, so
 * this is how a Neon database is prepared before `npm run deploy`. EMBEDDING_DIMENSIONS is checked
 * first, against the database and the embedding model, as the Node.js host does at start: with the
 * Worker's own settings, this is the edge deployment's start-up check.
 */
/** The configuration, once read: a failure's sentence names the database from it. */
let config: Config | undefined;

async function main() {
  config = parseConfig(process.env);
  const database = await createDatabase(config);
  try {
    warnIfNoProvider(config, consoleLogger);
    await checkEmbeddingDimensions({ db: database.db, config, llm: createLlm(config), log: consoleLogger });
    await migrateDatabase(database, config.openai.embeddingDimensions);
    console.log(`Migrations applied (${database.kind})`);
    const admin = await bootstrapAdmin({ db: database.db, config, clock: systemClock });
    if (admin.created) console.log(`Admin user created: ${config.adminUsername}`);
    if (admin.generatedPassword) console.log(`Admin password: ${admin.generatedPassword}`);
  } finally {
    await database.close();
  }
}

main().catch((err) => {
  // As `npm start` says it: a cause the operator fixes is one plain sentence, anything else a stack.
  const message = startFailureMessage(err, config);
  if (message) console.error(message);
  else consoleLogger.error("migration failed", errorFields(err));
  process.exit(1);
});

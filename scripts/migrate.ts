import { bootstrapAdmin } from "../lib/auth";
import { systemClock } from "../lib/clock";
import { parseConfig } from "../lib/config";
import { migrateDatabase } from "../lib/db/migrate";
import { createDatabase } from "../lib/db/node";

/**
 * `npm run db:migrate`: apply the migrations to DATABASE_URL (or the embedded database) and
 * create the admin user on an empty database. The Worker never migrates at request time, so
 * this is how a Neon database is prepared before `npm run deploy`.
 */
const config = parseConfig(process.env);
const database = await createDatabase(config);
try {
  await migrateDatabase(database, config.openai.embeddingDimensions);
  console.log(`Migrations applied (${database.kind})`);
  const admin = await bootstrapAdmin({ db: database.db, config, clock: systemClock });
  if (admin.created) console.log(`Admin user created: ${config.adminUsername}`);
  if (admin.generatedPassword) console.log(`Admin password: ${admin.generatedPassword}`);
} finally {
  await database.close();
}

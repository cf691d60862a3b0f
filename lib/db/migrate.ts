import { fileURLToPath } from "node:url";
import type { MigrationConfig } from "drizzle-orm/migrator";
import type { Database } from "./types";
import { ensureVectorIndexes } from "./vector-indexes";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/** Apply drizzle-kit's SQL migrations with the driver's own migrator, then the vector indexes. */
export async function migrateDatabase(database: Database, embeddingDimensions: number): Promise<void> {
  const config: MigrationConfig = { migrationsFolder: MIGRATIONS_FOLDER };
  const db = database.db as never;
  switch (database.kind) {
    case "pglite":
      await (await import("drizzle-orm/pglite/migrator")).migrate(db, config);
      break;
    case "neon":
      await (await import("drizzle-orm/neon-http/migrator")).migrate(db, config);
      break;
    case "pg":
      await (await import("drizzle-orm/node-postgres/migrator")).migrate(db, config);
      break;
  }
  await ensureVectorIndexes(database.db, embeddingDimensions);
}

import { sql } from "drizzle-orm";
import { z } from "zod";
import { type Config, embeddingsConfigured, providerConfigured } from "../config";
import { dbInt, parsedRowsOf } from "../db/rows";
import type { Db } from "../db/types";
import { EMBEDDED_TABLES } from "../db/vector-indexes";
import { NO_PROVIDER_MESSAGE } from "../errors";
import type { Logger } from "../log";
import type { Llm } from "./client";

/** Start refused: EMBEDDING_DIMENSIONS does not match the database or the embedding model. */
export class EmbeddingDimensionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EmbeddingDimensionsError";
  }
}

/** What the database says about vector sizes: the HNSW indexes made for each size, and stored vectors. */
export interface DatabaseEmbeddingSizes {
  /** `<table>_embedding_hnsw_<size>` indexes (lib/db/vector-indexes.ts), by size. */
  indexes: { name: string; dims: number }[];
  /** The size of the first stored vector found in each embedded table that has one. */
  stored: { table: string; dims: number }[];
}

/**
 * One look at the database (before migrating: missing tables are skipped). The stored sizes come
 * from the first vector of each table, which costs one row per table and no scan of the vectors.
 */
export async function databaseEmbeddingSizes(db: Db): Promise<DatabaseEmbeddingSizes> {
  const indexes = parsedRowsOf(
    z.object({ name: z.string() }),
    await db.execute(sql`
      SELECT indexname AS name FROM pg_indexes
      WHERE schemaname = current_schema() AND indexname ~ '^(facts|entities|episodes)_embedding_hnsw_[0-9]+$'
      ORDER BY indexname`),
  ).map(({ name }) => ({ name, dims: Number(name.slice(name.lastIndexOf("_") + 1)) }));
  const stored: DatabaseEmbeddingSizes["stored"] = [];
  for (const table of EMBEDDED_TABLES) {
    const [exists] = parsedRowsOf(
      z.object({ present: z.boolean() }),
      await db.execute(sql`SELECT to_regclass(${table}) IS NOT NULL AS present`),
    );
    if (!exists?.present) continue;
    const [row] = parsedRowsOf(
      z.object({ dims: dbInt }),
      await db.execute(
        sql.raw(`SELECT vector_dims(embedding) AS dims FROM ${table} WHERE embedding IS NOT NULL LIMIT 1`),
      ),
    );
    if (row) stored.push({ table, dims: row.dims });
  }
  return { indexes, stored };
}

/**
 * The database side of the start-up check: vectors of another size are never searched (queries
 * filter on the configured size), so a database that holds them, or that was migrated for another
 * size and has no index for this one, refuses the start rather than the first write.
 */
export function databaseMismatch(config: Config, sizes: DatabaseEmbeddingSizes): string | undefined {
  const { embeddingDimensions: dims, embeddingModel: model } = config.openai;
  const other = sizes.stored.find((s) => s.dims !== dims);
  if (other) {
    return (
      `EMBEDDING_DIMENSIONS is ${dims} (embedding model "${model}") but the database holds vectors of size ` +
      `${other.dims} (table ${other.table}). Set EMBEDDING_DIMENSIONS=${other.dims} with the model that made ` +
      "them, or use a new database: vectors of another size are never searched."
    );
  }
  if (sizes.stored.length > 0 || sizes.indexes.length === 0 || sizes.indexes.some((i) => i.dims === dims)) {
    return undefined;
  }
  const found = [...new Set(sizes.indexes.map((i) => i.dims))].join(", ");
  return (
    `EMBEDDING_DIMENSIONS is ${dims} (embedding model "${model}") but the database was migrated for vectors ` +
    `of size ${found} (indexes ${sizes.indexes.map((i) => i.name).join(", ")}) and holds no vectors yet. ` +
    `Set EMBEDDING_DIMENSIONS=${sizes.indexes[0].dims}, or, to change the size of this empty database, drop ` +
    "those indexes first."
  );
}

export function modelMismatch(config: Config, size: number): string | undefined {
  const { embeddingDimensions: dims, embeddingModel: model } = config.openai;
  if (size === dims) return undefined;
  return (
    `EMBEDDING_DIMENSIONS is ${dims} but the embedding model "${model}" returns vectors of size ${size} ` +
    `(asked for ${dims}). Set EMBEDDING_DIMENSIONS=${size}; only models that take the dimensions ` +
    "parameter (OpenAI's text-embedding-3-*) can be asked for a smaller size."
  );
}

/**
 * The start-up check of EMBEDDING_DIMENSIONS, once per start: against the database, then, with a
 * provider configured, against the model (one embedding call of a short probe text). A provider
 * that cannot be reached is a warning and the start goes on: the rest of the service works without
 * it, and every embedding call still checks the size it gets, so no vector of the wrong size is
 * ever written. A mismatch throws an EmbeddingDimensionsError naming EMBEDDING_DIMENSIONS, the
 * model and the size found.
 */
export async function checkEmbeddingDimensions(deps: { db: Db; config: Config; llm: Llm; log: Logger }) {
  const { config, log } = deps;
  const dbProblem = databaseMismatch(config, await databaseEmbeddingSizes(deps.db));
  if (dbProblem) throw new EmbeddingDimensionsError(dbProblem);
  if (!embeddingsConfigured(config)) return { model: "not configured" as const };
  let size: number;
  try {
    size = await deps.llm.embeddingSize();
  } catch (err) {
    log.warn("could not check the embedding model's vector size at start; going on", {
      model: config.openai.embeddingModel,
      embeddingDimensions: config.openai.embeddingDimensions,
      error: err instanceof Error ? err.message : String(err),
    });
    return { model: "unreachable" as const };
  }
  const modelProblem = modelMismatch(config, size);
  if (modelProblem) throw new EmbeddingDimensionsError(modelProblem);
  return { model: "ok" as const, size };
}

const warnedNoProvider = new WeakSet<Config>();

/** The start-up warning without a provider, once per parsed configuration (a Worker isolate's too). */
export function warnIfNoProvider(config: Config, log: Logger): void {
  if (providerConfigured(config) || warnedNoProvider.has(config)) return;
  warnedNoProvider.add(config);
  log.warn(
    `${NO_PROVIDER_MESSAGE}. Until then chat, compaction and episode search answer 500, episodes and facts fail, and recall searches by keyword.`,
  );
}

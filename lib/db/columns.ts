import { customType, timestamp } from "drizzle-orm/pg-core";

/** Timestamps are stored with time zone and surfaced as Date objects. */
export const timestamptz = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

export const createdAt = () => timestamptz("created_at").notNull().defaultNow();
export const updatedAt = () => timestamptz("updated_at").notNull().defaultNow();

/**
 * An embedding stored as an untyped pgvector `halfvec` (2 bytes per dimension: 3 KB at 1536
 * dimensions, where a `vector` took 6 KB). The dimension is a deployment setting
 * (EMBEDDING_DIMENSIONS), so the column carries none; the HNSW indexes are expression indexes
 * created for the configured size (see lib/db/vector-indexes.ts).
 */
export const embedding = customType<{ data: number[]; driverData: string }>({
  dataType: () => "halfvec",
  toDriver: (value) => `[${value.join(",")}]`,
  fromDriver: (value) => (typeof value === "string" ? value.slice(1, -1).split(",").map(Number) : (value as number[])),
});

/** Full-text search vector (generated column), never written by the application. */
export const tsvector = customType<{ data: string }>({ dataType: () => "tsvector" });

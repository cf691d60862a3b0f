import { sql } from "drizzle-orm";
import { customType } from "drizzle-orm/pg-core";
import { parsePgTimestamp } from "./timestamps";

/**
 * Timestamps are stored with time zone and surfaced as Date objects. Drizzle's own `timestamp`
 * reads the driver's text with `new Date`, which moves the years 0001-0099 by centuries (a
 * backfilled `createdAt` is any year from 0001): `parsePgTimestamp` reads it as it is.
 */
export const timestamptz = customType<{ data: Date; driverData: string | Date }>({
  dataType: () => "timestamp with time zone",
  toDriver: (value) => value.toISOString(),
  fromDriver: (value) => (value instanceof Date ? value : parsePgTimestamp(value)),
});

export const createdAt = () => timestamptz("created_at").notNull().default(sql`now()`);
export const updatedAt = () => timestamptz("updated_at").notNull().default(sql`now()`);

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

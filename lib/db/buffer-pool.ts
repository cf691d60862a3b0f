import { sql } from "drizzle-orm";
import type { Logger } from "../log";
import { rowsOf } from "./rows";
import type { Db } from "./types";

const MB = 1024 * 1024;

/**
 * Vector indexes up to this size search well from the host's page cache through the default
 * buffer pool (100,000 facts, a 250 MB index: recall 28 ms p50); at a million (1.37 GB) every
 * search read its pages through the WASM file system: 49 ms, 24 with a pool that holds them
 * (bench/RESULTS.md, night of 2026-11-27).
 */
export const INDEX_BYTES_WORTH_A_WARNING = 512 * MB;
/**
 * The largest pool to suggest: measured with a million facts (1200MB: recall 24 ms p50), and
 * well inside PGlite's 2 GiB of WASM memory beside the backend's own (~200 MB) and its queries.
 */
export const LARGEST_USEFUL_POOL = 1200 * MB;

export type BufferPoolAdvice = { kind: "fits" } | { kind: "raise"; suggestMB: number; holdsAll: boolean };

/**
 * Whether the embedded database's buffer pool should be larger for its vector indexes: not
 * while they are small (the host's page cache serves them well enough), nor when the pool holds
 * them or is already the largest worth having; otherwise a PGLITE_SHARED_BUFFERS that holds them
 * with room to spare, in 100 MB steps, at most LARGEST_USEFUL_POOL (`holdsAll` false: even that
 * holds only the graph's most visited part, and a Postgres server is the next step).
 */
export function bufferPoolAdvice(indexBytes: number, poolBytes: number): BufferPoolAdvice {
  if (indexBytes <= INDEX_BYTES_WORTH_A_WARNING || indexBytes <= poolBytes) return { kind: "fits" };
  const wanted = Math.ceil((indexBytes * 1.15) / (100 * MB)) * 100 * MB;
  const suggested = Math.min(wanted, LARGEST_USEFUL_POOL);
  if (suggested <= poolBytes) return { kind: "fits" };
  return { kind: "raise", suggestMB: suggested / MB, holdsAll: suggested === wanted };
}

/**
 * At the embedded host's start: a warning when its HNSW indexes outgrow its buffer pool, saying
 * what to set, so a slow recall at scale explains itself in the log. One statement.
 */
export async function warnIfIndexesOutgrowBufferPool(
  db: Db,
  log: Logger,
  advise: typeof bufferPoolAdvice = bufferPoolAdvice,
): Promise<void> {
  const [row] = rowsOf<{ index_bytes: number | string; pool_bytes: number | string }>(
    await db.execute(sql`SELECT
      (SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_am am ON am.oid = c.relam
        WHERE am.amname = 'hnsw') AS index_bytes,
      (SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings
        WHERE name = 'shared_buffers') AS pool_bytes`),
  );
  const indexBytes = Number(row?.index_bytes ?? 0);
  const poolBytes = Number(row?.pool_bytes ?? 0);
  const advice = advise(indexBytes, poolBytes);
  if (advice.kind === "fits") return;
  const fields = { vectorIndexMB: Math.round(indexBytes / MB), sharedBuffersMB: Math.round(poolBytes / MB) };
  const beyond = advice.holdsAll
    ? ""
    : " (the largest advised for the embedded database; past a million facts run on a Postgres server with pgvector, DATABASE_URL)";
  log.warn(
    `the vector indexes are larger than the embedded database's buffer pool, so recall reads index pages from disk: set PGLITE_SHARED_BUFFERS=${advice.suggestMB}MB${beyond}`,
    fields,
  );
}

import pg from "pg";
import { pgliteClientOf } from "../lib/db/pglite";
import type { Queryable } from "./bulk-load";
import type { Bench } from "./lib";
import { copyFrom } from "./pg-copy";

/**
 * One session on the bench's database for loading it: statements, COPY of rows the bench made in
 * memory, and what the server says meanwhile (pgvector's notice when an HNSW graph outgrows
 * maintenance_work_mem). The embedded database is one session already; on a server it is one
 * connection of its own beside the service's pool, so a `SET maintenance_work_mem` holds for the
 * builds that follow it.
 */
export interface BulkClient extends Queryable {
  /** `COPY <target> FROM ...` with `bytes` as its input, in `format`. */
  copy(target: string, format: "csv" | "binary", bytes: Uint8Array<ArrayBuffer>): Promise<void>;
  /** A statement whose notices go to `onNotice`. */
  queryWithNotices(text: string, onNotice: (message: string) => void): Promise<void>;
  close(): Promise<void>;
}

export async function openBulkClient(bench: Bench): Promise<BulkClient> {
  if (!bench.server) {
    const client = pgliteClientOf(bench.database);
    return {
      query: <T>(text: string, params?: unknown[]) => client.query<T>(text, params),
      copy: async (target, format, bytes) => {
        await client.query(`COPY ${target} FROM '/dev/blob' WITH (FORMAT ${format})`, [], { blob: new Blob([bytes]) });
      },
      queryWithNotices: async (text, onNotice) => {
        await client.query(text, [], { onNotice: (notice) => onNotice(notice.message ?? "") });
      },
      close: async () => {},
    };
  }
  const client = new pg.Client({ connectionString: bench.server.url });
  await client.connect();
  let listener: ((message: string) => void) | undefined;
  client.on("notice", (notice) => listener?.(notice.message ?? ""));
  return {
    query: async <T>(text: string, params?: unknown[]) =>
      (await client.query(text, params)) as unknown as { rows: T[] },
    copy: (target, format, bytes) => copyFrom(client, `COPY ${target} FROM STDIN WITH (FORMAT ${format})`, bytes),
    queryWithNotices: async (text, onNotice) => {
      listener = onNotice;
      try {
        await client.query(text);
      } finally {
        listener = undefined;
      }
    },
    close: () => client.end(),
  };
}

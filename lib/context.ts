import type { ProjectRef } from "./db/types";
import type { Deps } from "./deps";

/**
 * What a read verb receives first: its dependencies and its project, as an id or (for a /v1 read,
 * whose API key is checked in the read's own round trip: lib/auth.ts `deferApiKey`) as SQL that
 * finds it. A read uses `projectId` only inside SQL.
 */
export interface ReadContext {
  deps: Deps;
  /** The project every statement of the verb is filtered by (another project's row is a 404). */
  projectId: ProjectRef;
  /**
   * Whose ledger the verb's provider calls go to; `projectId` when absent. A /v1 read's is its
   * API key's project whether or not the key is still active (lib/auth.ts `deferApiKey`).
   */
  ledgerProjectId?: ProjectRef;
  /**
   * Who asks, for what a process keeps per tenant (the query embeddings), when `projectId` is SQL
   * (a /v1 read whose key is checked in its own statement): its API key's hash. Absent, a string
   * `projectId` is the tenant; with neither, nothing is kept.
   */
  tenant?: string;
}

/** Who is asking and with what: what every request-scoped domain verb that writes receives first. */
export interface ProjectContext extends ReadContext {
  projectId: string;
}

import type { Deps } from "./deps";

/** Who is asking and with what: what every request-scoped domain verb receives first. */
export interface ProjectContext {
  deps: Deps;
  /** The project every statement of the verb is filtered by (another project's row is a 404). */
  projectId: string;
}

/**
 * The /v1 routes that are memory operations in OpenTelemetry's GenAI semantic conventions
 * (`gen_ai.operation.name`): writing messages creates memory records, reading them back (recall,
 * prepare, lists, searches) searches memory, compaction updates it, a delete deletes it. Keyed by
 * method and Hono's route template (what functions/request-log.ts logs).
 */
export type MemoryOperationName = "create_memory" | "search_memory" | "update_memory" | "delete_memory";

export interface MemoryOperation {
  name: MemoryOperationName;
  /** The route parameter naming the record the operation is about, if any (`gen_ai.memory.record.id`). */
  recordParam?: string;
  /** Records the operation is about when the route says (one message); verbs add it otherwise. */
  recordCount?: number;
}

const W = "/v1/memory/working";
const S = "/v1/memory/semantic";
const E = "/v1/memory/episodic";

export const MEMORY_OPERATIONS: Readonly<Record<string, MemoryOperation>> = {
  [`POST ${W}/threads/:threadId/messages`]: { name: "create_memory", recordCount: 1 },
  [`POST ${W}/threads/:threadId/messages:batch`]: { name: "create_memory" },
  [`POST ${W}/messages:batch`]: { name: "create_memory" },
  [`GET ${W}/threads/:threadId/messages`]: { name: "search_memory" },
  [`POST ${W}/threads/:threadId/prepare`]: { name: "search_memory" },
  [`POST ${W}/threads/:threadId/compact`]: { name: "update_memory" },
  "POST /v1/memory/recall": { name: "search_memory" },
  "DELETE /v1/memory/recall/datasets/:dataset": { name: "delete_memory" },
  [`GET ${S}/datasets/:dataset/facts`]: { name: "search_memory" },
  [`GET ${S}/datasets/:dataset/entities/:name/facts`]: { name: "search_memory" },
  [`DELETE ${S}/datasets/:dataset/facts/:factId`]: { name: "delete_memory", recordParam: "factId", recordCount: 1 },
  [`GET ${E}/datasets/:dataset/episodes`]: { name: "search_memory" },
  [`GET ${E}/datasets/:dataset/episodes/search`]: { name: "search_memory" },
  [`GET ${E}/episodes/:episodeId`]: { name: "search_memory", recordParam: "episodeId", recordCount: 1 },
  [`DELETE ${E}/episodes/:episodeId`]: { name: "delete_memory", recordParam: "episodeId", recordCount: 1 },
};

/** The memory operation a request is, or undefined (most routes are none). */
export function memoryOperationOf(method: string, route: string | null): MemoryOperation | undefined {
  return route === null ? undefined : MEMORY_OPERATIONS[`${method} ${route}`];
}

/**
 * The parameters of a route template read from the path that matched it (`/threads/:threadId`
 * and `/threads/thr_1` give `{ threadId: "thr_1" }`). A middleware registered for every route runs
 * before Hono has bound the endpoint's own parameters, so it reads them this way.
 */
export function routeParams(template: string, path: string): Record<string, string> {
  const names = template.split("/");
  const values = path.split("/");
  const params: Record<string, string> = {};
  if (names.length !== values.length) return params;
  names.forEach((name, i) => {
    if (!name.startsWith(":")) return;
    try {
      params[name.slice(1)] = decodeURIComponent(values[i]);
    } catch {
      params[name.slice(1)] = values[i];
    }
  });
  return params;
}

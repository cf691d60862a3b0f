import { rowsOf } from "../../lib/db/rows";

/**
 * EXPLAIN (FORMAT JSON) read the same way by the tests and the bench: the plan of one statement
 * and its nodes. Only the fields they read are typed; Postgres prints each only where it applies.
 */
export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Subplan Name"?: string;
  "Sort Key"?: string[];
  Filter?: string;
  /** With ANALYZE: per loop. */
  "Actual Total Time"?: number;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  /** Per loop: the pairs a join compared and dropped. */
  "Rows Removed by Join Filter"?: number;
  /** With BUFFERS. */
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

export interface Plan {
  Plan: PlanNode;
  /** With ANALYZE. */
  "Planning Time"?: number;
  "Execution Time"?: number;
}

/**
 * The plan in EXPLAIN's one row, from a `db.execute()` result (or its rows): JSON text from
 * PGlite, already parsed from node-postgres.
 */
export function planOf(result: unknown): Plan {
  const rows = rowsOf<Record<string, unknown>>(result);
  const json = rows[0] ? Object.values(rows[0])[0] : undefined;
  const parsed: unknown = typeof json === "string" ? JSON.parse(json) : json;
  const plan = Array.isArray(parsed) ? (parsed[0] as Plan | undefined) : undefined;
  if (!plan?.Plan) throw new Error(`not an EXPLAIN (FORMAT JSON) result: ${JSON.stringify(rows).slice(0, 200)}`);
  return plan;
}

/** A plan's nodes, depth first, the node itself first. */
export const planNodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(planNodes)];

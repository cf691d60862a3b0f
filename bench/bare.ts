import { type SQL, sql } from "drizzle-orm";
import { nearestSql, vectorParam } from "../lib/db/vectors";

/**
 * The bare HNSW statement recall is compared with: the 8 live facts of a dataset nearest a query
 * vector (sent as a parameter, as recall sends it), through the same index and filter recall's
 * vector search uses, at the session's `hnsw.ef_search`, nothing else. The yardstick of "recall
 * close to the index" (issue 34, item 4): recall's whole request over this statement's time.
 */
export function bareTop8Sql(projectId: string, dataset: string, vector: number[], dims: number): SQL {
  return nearestSql({
    from: sql`facts f`,
    column: sql`f.embedding`,
    select: sql`f.id`,
    where: sql`f.project_id = ${projectId} AND f.dataset = ${dataset} AND f.invalid_at IS NULL`,
    query: vectorParam(vector),
    dims,
    limit: sql`8`,
  });
}

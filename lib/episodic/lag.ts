import { sql } from "drizzle-orm";
import { z } from "zod";
import { dbNumber, parsedRowsOf } from "../db/rows";
import { episodes } from "../db/schema";
import type { Deps } from "../deps";
import { errorFields } from "../log";
import { telemetry } from "../telemetry";

/**
 * Reports an episode's lag, from its end (`ended_at`, when the thread went idle or was ended) to
 * its summary's completion, when anybody listens (the metrics of the Node.js host): one small
 * statement per completed episode then, none otherwise. A failure here is logged, never the job's.
 */
export async function reportEpisodeLag(deps: Deps, episodeId: string): Promise<void> {
  const report = telemetry().episodeCompleted;
  if (!report) return;
  try {
    const [row] = parsedRowsOf(
      z.object({ lag: dbNumber.nullable() }),
      await deps.db.execute(sql`
        SELECT extract(epoch FROM processing_completed_at - ended_at) AS lag
        FROM ${episodes} WHERE id = ${episodeId} AND status = 'completed'`),
    );
    if (row?.lag !== null && row?.lag !== undefined) report(Math.max(0, row.lag));
  } catch (err) {
    deps.log.debug("could not read an episode's lag", { episodeId, ...errorFields(err) });
  }
}

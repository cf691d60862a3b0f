import type { Deps } from "../deps";
import { notFound } from "../errors";
import { type RecallRequest, recall } from "../recall/recall";

/**
 * The dashboard's recall playground: exactly what POST /v1/memory/recall answers for the project
 * (with `raw` included), plus how it was ranked: the mode, each fact's rank in every signal and
 * its fused score, and the time of each part. The same calls and the same one statement as /v1
 * (the ranks ride along in it), so what the operator sees is what an application gets.
 */
export async function playgroundRecall(deps: Deps, projectId: string, request: RecallRequest) {
  const include = [...new Set([...request.include, "raw" as const])];
  const { body, timings, explanation } = await recall(deps, projectId, { ...request, include }, { explain: true });
  if (!explanation?.projectFound) throw notFound("Project not found");
  return {
    recall: body,
    mode: explanation.mode,
    ranks: explanation.ranks ?? [],
    timing: timings.map((t) => ({ name: t.name, ms: t.ms })),
  };
}

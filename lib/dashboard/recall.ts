import type { ProjectContext } from "../context";
import { notFound } from "../errors";
import { type RecallRequest, recall } from "../recall/recall";

/**
 * The dashboard's recall playground: exactly what POST /v1/memory/recall answers for the project
 * (with `raw` included), plus how it was ranked: the mode, each fact's and each message's signal
 * scores and fused score, what the reranker did, and the time of each part. The same calls as /v1, so what the
 * operator sees is what an application gets.
 */
export async function playgroundRecall(ctx: ProjectContext, request: RecallRequest) {
  const include = [...new Set([...request.include, "raw" as const])];
  const { body, timings, explanation } = await recall(ctx, { ...request, include });
  if (!explanation.projectFound) throw notFound("Project not found");
  return {
    recall: body,
    mode: explanation.mode,
    signals: explanation.signals,
    messageSignals: explanation.messageSignals,
    rerank: explanation.rerank,
    timing: timings.map((t) => ({ name: t.name, ms: t.ms })),
  };
}

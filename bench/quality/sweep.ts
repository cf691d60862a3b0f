import { patchProjectSettings } from "../../lib/settings/store";
import { runRecall } from "./evaluate";
import type { Fixture, Question } from "./fixture";
import { score } from "./metrics";
import type { QualityService } from "./service";

export interface Weights {
  vectorWeight: number;
  keywordWeight: number;
  entityWeight: number;
  timeWeight: number;
}

/** 4 × 3 × 4 = 48 combinations (the vector weight stays 1: the scores are relative). */
export function weightGrid(): Weights[] {
  const grid: Weights[] = [];
  for (const keywordWeight of [0, 0.2, 0.5, 1]) {
    for (const entityWeight of [0, 0.1, 0.3]) {
      for (const timeWeight of [0, 0.1, 0.3, 0.6])
        grid.push({ vectorWeight: 1, keywordWeight, entityWeight, timeWeight });
    }
  }
  return grid;
}

/** Every n-th question, so that about `count` remain in each kind's proportion (a bounded sweep). */
export function sampleQuestions<T>(questions: T[], count: number): T[] {
  const step = Math.max(1, Math.ceil(questions.length / count));
  return questions.filter((_, i) => i % step === 0);
}

/**
 * For each combination, the project's semantic weights patched in place, then the questions'
 * 30-fact recall again (hit@8 is a rank <= 8 there). Sorted by hit@8, then MRR.
 */
export async function sweepWeights(
  q: QualityService,
  fixture: Fixture,
  questions: Question[],
  grid = weightGrid(),
  log: (line: string) => void = () => {},
) {
  const results: (Weights & ReturnType<typeof score>)[] = [];
  for (const [i, weights] of grid.entries()) {
    await patchProjectSettings({ deps: q.service.deps, projectId: q.projectId }, { semantic: weights });
    const run = await runRecall(q, fixture, questions, true);
    results.push({ ...weights, ...score(run.outcomes) });
    log(`sweep ${i + 1}/${grid.length}: ${JSON.stringify(weights)}`);
  }
  return results.sort((a, b) => b.hit8 - a.hit8 || b.mrr - a.mrr);
}

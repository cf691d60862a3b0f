/**
 * Retrieval metrics over ranked lists of ids: hit@k (any gold id in the first k), reciprocal
 * rank of the first gold id, and their means per question kind.
 */

/** The 1-based rank of the first gold id in `ranked`, or null when none is there. */
export function firstGoldRank(ranked: readonly string[], gold: readonly string[]): number | null {
  const wanted = new Set(gold);
  const index = ranked.findIndex((id) => wanted.has(id));
  return index < 0 ? null : index + 1;
}

export const hitAt = (rank: number | null, k: number) => (rank !== null && rank <= k ? 1 : 0);
export const reciprocal = (rank: number | null) => (rank === null ? 0 : 1 / rank);

/** Ids ordered by score, highest first; ties keep the input order. */
export function rankByScore(ids: readonly string[], scores: readonly number[]): string[] {
  return ids
    .map((id, i) => ({ id, score: scores[i], i }))
    .sort((a, b) => b.score - a.score || a.i - b.i)
    .map((x) => x.id);
}

/** Reciprocal Rank Fusion of ranked lists: sum of 1/(k + rank) over the lists holding an id. */
export function rrf(lists: readonly (readonly string[])[], k = 60): string[] {
  const scores = new Map<string, number>();
  const firstSeen = new Map<string, number>();
  for (const list of lists) {
    list.forEach((id, i) => {
      scores.set(id, (scores.get(id) ?? 0) + 1 / (k + i + 1));
      if (!firstSeen.has(id)) firstSeen.set(id, firstSeen.size);
    });
  }
  return [...scores]
    .sort((a, b) => b[1] - a[1] || (firstSeen.get(a[0]) ?? 0) - (firstSeen.get(b[0]) ?? 0))
    .map(([id]) => id);
}

export function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / (Math.sqrt(na * nb) || 1);
}

/** One question's outcome for one system. */
export interface Outcome {
  kind: string;
  /** Rank of the first gold fact in the system's list of 30 (null: not in it). */
  rank: number | null;
  /** Gold fact in the default-size block (for recall; for baselines, rank <= 8). */
  inBlock: boolean;
}

export interface Scores {
  questions: number;
  hit1: number;
  hit8: number;
  hit30: number;
  mrr: number;
}

export function score(outcomes: readonly Outcome[]): Scores {
  const n = outcomes.length;
  const mean = (f: (o: Outcome) => number) => (n === 0 ? 0 : outcomes.reduce((s, o) => s + f(o), 0) / n);
  return {
    questions: n,
    hit1: mean((o) => hitAt(o.rank, 1)),
    hit8: mean((o) => (o.inBlock ? 1 : 0)),
    hit30: mean((o) => hitAt(o.rank, 30)),
    mrr: mean((o) => reciprocal(o.rank)),
  };
}

/** Scores overall and per kind (kinds in the order given). */
export function scoreByKind(outcomes: readonly Outcome[], kinds: readonly string[]) {
  return {
    all: score(outcomes),
    byKind: Object.fromEntries(kinds.map((k) => [k, score(outcomes.filter((o) => o.kind === k))])),
  };
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)];
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

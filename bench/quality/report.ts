import type { Scores } from "./metrics";

const pct = (x: number) => (x * 100).toFixed(1);

export interface ScoredSystem {
  name: string;
  all: Scores;
  byKind: Record<string, Scores>;
}

/** One row per system: hit@1, hit@8, hit@30, MRR overall, then hit@8 per kind. */
export function qualityTable(systems: ScoredSystem[], kinds: string[]): string {
  const counts = kinds.map((k) => `${k} (${systems[0]?.byKind[k]?.questions ?? 0})`);
  const header = ["system", "hit@1", "hit@8", "hit@30", "MRR", ...counts.map((c) => `hit@8 ${c}`)];
  const rows = systems.map((s) => [
    s.name,
    pct(s.all.hit1),
    pct(s.all.hit8),
    pct(s.all.hit30),
    s.all.mrr.toFixed(3),
    ...kinds.map((k) => pct(s.byKind[k]?.hit8 ?? 0)),
  ]);
  return markdown(header, rows);
}

/** hit@30 per kind, the second table (where the long list, not the block, is the question). */
export function longListTable(systems: ScoredSystem[], kinds: string[]): string {
  const header = ["system", ...kinds.map((k) => `hit@30 ${k}`), ...kinds.map((k) => `MRR ${k}`)];
  const rows = systems.map((s) => [
    s.name,
    ...kinds.map((k) => pct(s.byKind[k]?.hit30 ?? 0)),
    ...kinds.map((k) => (s.byKind[k]?.mrr ?? 0).toFixed(3)),
  ]);
  return markdown(header, rows);
}

export function markdown(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map((_, i) => (i === 0 ? "---" : "---:"))), ...rows.map(line)].join("\n");
}

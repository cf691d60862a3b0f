import { sql } from "drizzle-orm";
import { rowsOf } from "../../lib/db/rows";
import type { Deps } from "../../lib/deps";
import { BM25_B, BM25_K1, KEYWORD_FULL_MATCH_WORDS } from "../../lib/recall/keyword";

/**
 * The keyword signal recall should give each of `candidates` (docs/ranking.md), computed here in
 * JavaScript from the facts' own lexemes, not by the service's SQL: Okapi BM25 over every fact of
 * the dataset (what its statistics count), divided by the larger of the best candidate's and the
 * BM25 of an average-length fact holding KEYWORD_FULL_MATCH_WORDS words no other fact holds.
 * Only Postgres' English stemming is borrowed (to_tsvector), as the service does.
 */
export async function keywordSignals(
  deps: Pick<Deps, "db">,
  scope: { projectId: string; dataset: string },
  query: string,
  candidates: string[],
): Promise<Map<string, number>> {
  const terms = rowsOf<{ lexeme: string }>(
    await deps.db.execute(sql`SELECT lexeme FROM unnest(to_tsvector('english', ${query})) WHERE lexeme <> 'user'`),
  ).map((r) => r.lexeme);
  const facts = rowsOf<{ id: string; len: number; tf: Record<string, number> | null }>(
    await deps.db.execute(sql`
      SELECT f.id, length(f.search) AS len,
        (SELECT json_object_agg(u.lexeme, cardinality(u.positions)) FROM unnest(f.search) u) AS tf
      FROM facts f WHERE f.project_id = ${scope.projectId} AND f.dataset = ${scope.dataset}`),
  );
  const n = facts.length;
  const avgLen = Math.max(facts.reduce((sum, f) => sum + Number(f.len), 0) / Math.max(n, 1), 1);
  const idf = (docs: number) => Math.log(1 + (n - docs + 0.5) / (docs + 0.5));
  const docsOf = new Map(terms.map((t) => [t, facts.filter((f) => (f.tf?.[t] ?? 0) > 0).length]));
  const bm25 = new Map(
    facts.map((f) => {
      let sum = 0;
      for (const t of terms) {
        const tf = f.tf?.[t] ?? 0;
        if (tf > 0) {
          sum +=
            (idf(docsOf.get(t) ?? 0) * tf * (BM25_K1 + 1)) /
            (tf + BM25_K1 * (1 - BM25_B + (BM25_B * Number(f.len)) / avgLen));
        }
      }
      return [f.id, sum];
    }),
  );
  const best = Math.max(0, ...candidates.map((id) => bm25.get(id) ?? 0));
  const fullMatch = KEYWORD_FULL_MATCH_WORDS * idf(1);
  const divisor = Math.max(best, fullMatch);
  return new Map(candidates.map((id) => [id, divisor > 0 ? (bm25.get(id) ?? 0) / divisor : 0]));
}

/**
 * Okapi BM25 over a small in-memory corpus: the benchmark's keyword baseline. Terms are
 * lower-cased letter/digit runs with English stop words removed; no stemming beyond a plural
 * "s", so the baseline stays a plain, explainable one.
 */
export const STOP_WORDS = new Set(
  (
    "a an and are as at be been before but by can could did do does for from had has have how i i'm if in " +
    "is it its me my myself no not now of on or our so that the their them then there these they this to " +
    "us was we were what when where which who why will with would you your user am any ever each just"
  ).split(" "),
);

export function terms(text: string): string[] {
  const words =
    text
      .toLowerCase()
      .replace(/[\u2018\u2019']/g, "")
      .match(/[\p{L}\p{N}]+/gu) ?? [];
  return words
    .filter((w) => !STOP_WORDS.has(w))
    .map((w) => (w.length > 3 && w.endsWith("s") && !w.endsWith("ss") ? w.slice(0, -1) : w));
}

export interface Bm25Options {
  k1?: number;
  b?: number;
}

/** An index over `docs`; `score(query)` gives one score per document, in the documents' order. */
export function bm25Index(docs: string[], { k1 = 1.2, b = 0.75 }: Bm25Options = {}) {
  const tokenised = docs.map(terms);
  const lengths = tokenised.map((t) => t.length);
  const avgLength = lengths.reduce((s, l) => s + l, 0) / Math.max(1, docs.length);
  const frequencies = tokenised.map((t) => {
    const tf = new Map<string, number>();
    for (const term of t) tf.set(term, (tf.get(term) ?? 0) + 1);
    return tf;
  });
  const documentFrequency = new Map<string, number>();
  for (const tf of frequencies)
    for (const term of tf.keys()) documentFrequency.set(term, (documentFrequency.get(term) ?? 0) + 1);
  const n = docs.length;
  // The Lucene form of IDF: never negative, so a term in most documents still counts a little.
  const idf = (term: string) => {
    const df = documentFrequency.get(term) ?? 0;
    return Math.log(1 + (n - df + 0.5) / (df + 0.5));
  };
  return {
    score(query: string): number[] {
      const queryTerms = [...new Set(terms(query))];
      return frequencies.map((tf, d) => {
        let score = 0;
        for (const term of queryTerms) {
          const f = tf.get(term);
          if (!f) continue;
          score += (idf(term) * f * (k1 + 1)) / (f + k1 * (1 - b + (b * lengths[d]) / avgLength));
        }
        return score;
      });
    },
  };
}

/**
 * The second hop: the entities of the HOP_SOURCES keyword candidates that hold the query's words
 * best (by BM25 alone, so the hop does not depend on the boost it gives). "Which city is my
 * brother based in?" holds "brother", which "has_brother Anna" holds; Anna is then an entity the
 * question points at through that fact, and "Anna works at Heineken in Edinburgh" gets the boost
 * of an entity the query names (HOP_STRENGTH), which its words and meaning alone did not earn it
 * over the sister's, cousin's and father's jobs. On `npm run bench:quality` (bench/RESULTS.md,
 * afternoon of 2026-11-29) multi-hop hit@8 went from 66.7 to 97.9 with 1, 2 or 3 sources, 95.8
 * with half the boost; no other kind moved (100 since the hop's entities bring their facts).
 * Messages that name a hop entity get the same boost (lib/recall/messages.ts).
 */
export const HOP_SOURCES = 2;
export const HOP_STRENGTH = 1;

import { loadEmbedder } from "./embedder";
import { ceiling, readStoredFacts, runBaselines, runRecall, summariseRecall } from "./evaluate";
import { type Fixture, type FixtureSize, FULL, generateFixture, type Question } from "./fixture";
import { episodeStatuses, startQualityService, writeFixture } from "./service";
import { sampleQuestions, sweepWeights } from "./sweep";

export interface QualityOptions {
  seed: number;
  size?: FixtureSize;
  /** Only these questions (the smoke test's subset); all of the fixture's by default. */
  select?: (questions: Question[]) => Question[];
  /** After measuring, with the data still in place: the weight sweep over about this many questions. */
  sweep?: number;
  /** The share of gold facts the scripted extraction stores (1: all; see extractionKeepsFact). */
  extractionKeeps?: number;
  log?: (line: string) => void;
}

/**
 * The whole benchmark once: the fixture written through the API, every question recalled, the
 * baselines computed on the facts the service stored.
 */
export async function runQuality(options: QualityOptions) {
  const log = options.log ?? (() => {});
  const fixture = generateFixture(options.seed, options.size ?? FULL);
  const all = fixture.users.flatMap((u) => u.questions);
  const questions = options.select ? options.select(all) : all;
  const embedder = await loadEmbedder();
  const q = await startQualityService(fixture, embedder, options.extractionKeeps ?? 1);
  try {
    const t0 = performance.now();
    log(`writing ${fixture.users.reduce((n, u) => n + u.sessions.length, 0)} sessions`);
    const episodes = await writeFixture(q, fixture);
    const writeSeconds = (performance.now() - t0) / 1000;
    const stored = await readStoredFacts(q, fixture);
    log(`stored ${stored.all.length} facts (${stored.live.length} live) in ${writeSeconds.toFixed(1)} s; recalling`);
    const t1 = performance.now();
    const recall = summariseRecall(await runRecall(q, fixture, questions));
    const baselines = await runBaselines(questions, stored.live, embedder);
    const evalSeconds = (performance.now() - t1) / 1000;
    const sweep = options.sweep
      ? await sweepWeights(q, fixture, sampleQuestions(questions, options.sweep), undefined, log)
      : undefined;
    return {
      seed: fixture.seed,
      now: fixture.now,
      extractionKeeps: options.extractionKeeps ?? 1,
      sizes: sizes(fixture, questions, stored),
      episodes,
      ceiling: { live: ceiling(questions, stored.live), stored: ceiling(questions, stored.all) },
      recall,
      baselines,
      seconds: { write: writeSeconds, evaluate: evalSeconds },
      sweep,
    };
  } finally {
    await q.close();
  }
}

export type QualityResult = Awaited<ReturnType<typeof runQuality>>;

function sizes(fixture: Fixture, questions: Question[], stored: Awaited<ReturnType<typeof readStoredFacts>>) {
  const facts = fixture.users.flatMap((u) => u.facts);
  const gold = new Set(facts.map((f) => f.id));
  const superseding = facts.filter((f) => f.supersedes);
  const liveIds = new Set(stored.live.map((f) => f.id));
  return {
    users: fixture.users.length,
    sessions: fixture.users.reduce((n, u) => n + u.sessions.length, 0),
    messages: fixture.users.reduce((n, u) => n + u.sessions.reduce((m, s) => m + s.messages.length, 0), 0),
    goldFacts: facts.length,
    questions: questions.length,
    /** Gold facts the service stored (live or superseded). */
    goldStored: stored.all.filter((f) => gold.has(f.id)).length,
    /** Stored facts that are no gold fact (should be 0). */
    strayStored: stored.all.filter((f) => !gold.has(f.id)).length,
    liveFacts: stored.live.length,
    supersessions: superseding.length,
    /** Earlier facts the service invalidated as the fixture says (the later one stored and live). */
    supersessionsApplied: superseding.filter(
      (f) => !liveIds.has(f.supersedes as string) && stored.all.some((s) => s.id === f.supersedes),
    ).length,
  };
}

export { episodeStatuses };

/**
 * The retrieval-quality fixture: users (one dataset each) with multi-session conversations, the
 * facts an extractor should find in them (gold facts) and questions naming which facts answer
 * them. Generated from templates with a seeded generator: no network, no model, the same seed
 * gives the same fixture byte for byte.
 */
import { EVENTS, FILLERS, PREFERENCES, TRIP, TRIP_PLACES } from "./templates";

export type QuestionKind = "single-hop" | "multi-hop" | "temporal" | "entity" | "paraphrase";
export const QUESTION_KINDS: QuestionKind[] = ["single-hop", "multi-hop", "temporal", "entity", "paraphrase"];

export type EntityType = "PERSON" | "ORG" | "PLACE" | "PRODUCT" | "EVENT" | "CONCEPT" | "OTHER";

export interface GoldFact {
  /** Unique in the fixture: `<dataset>/<n>`. */
  id: string;
  dataset: string;
  subject: "user";
  predicate: string;
  object: string;
  objectIsEntity: boolean;
  sourceQuote: string;
  /** ISO date-time. */
  validAt: string;
  confidence: number;
  /** The fact this one makes no longer true (a move, a new job). */
  supersedes?: string;
  /** Entities the extractor names with this fact. */
  entities: { name: string; type: EntityType }[];
  /** The session it is said in (set when sessions are cut). */
  sessionId: string;
}

export interface Message {
  role: "user" | "assistant";
  content: string;
  createdAt: string;
}

export interface Session {
  id: string;
  dataset: string;
  createdAt: string;
  messages: Message[];
  factIds: string[];
  summary: string;
}

export interface Question {
  id: string;
  dataset: string;
  kind: QuestionKind;
  query: string;
  /** Hit when any of these is retrieved. */
  gold: string[];
}

export interface UserFixture {
  dataset: string;
  name: string;
  sessions: Session[];
  facts: GoldFact[];
  questions: Question[];
}

export interface Fixture {
  seed: number;
  /** The benchmark's "now" (the service's clock): "last year" is the year before it. */
  now: string;
  users: UserFixture[];
}

export interface FixtureSize {
  users: number;
  /** Relatives per user (each: a relation fact and a fact about where they work). */
  relatives: number;
  /** Dated events per user (at most EVENTS.length). */
  events: number;
  /** Preference facts per user (at most PREFERENCES.length). */
  preferences: number;
  /** Unrelated facts per user. */
  fillers: number;
}

export const FULL: FixtureSize = { users: 6, relatives: 4, events: 14, preferences: 16, fillers: 58 };
export const QUICK: FixtureSize = { users: 2, relatives: 3, events: 10, preferences: 10, fillers: 20 };
/** The CI smoke test's: one user, 20 facts. */
export const TINY: FixtureSize = { users: 1, relatives: 1, events: 4, preferences: 4, fillers: 5 };

export const BENCH_NOW = "2025-01-15T12:00:00.000Z";

/** mulberry32: small, fast, and the same on every platform. */
export function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)];
  /** `n` distinct items, in random order. */
  const sample = <T>(items: readonly T[], n: number): T[] => {
    const copy = [...items];
    for (let i = copy.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [copy[i], copy[j]] = [copy[j], copy[i]];
    }
    return copy.slice(0, n);
  };
  return { next, int, pick, sample };
}
export type Rng = ReturnType<typeof rng>;

export const FIRST_NAMES = [
  "Anna",
  "Marco",
  "Priya",
  "Tomasz",
  "Lucia",
  "Kenji",
  "Fatima",
  "Oskar",
  "Ines",
  "Diego",
  "Chloe",
  "Rafael",
  "Sofia",
  "Emeka",
  "Hana",
  "Lars",
  "Mei",
  "Pavel",
  "Zara",
  "Nico",
  "Leila",
  "Mateo",
  "Greta",
  "Yusuf",
  "Elena",
  "Bruno",
  "Aisha",
  "Felix",
  "Noor",
  "Viktor",
];
export const CITIES = [
  "Lisbon",
  "Berlin",
  "Toronto",
  "Melbourne",
  "Osaka",
  "Valencia",
  "Krakow",
  "Dublin",
  "Austin",
  "Nairobi",
  "Montreal",
  "Seoul",
  "Bristol",
  "Porto",
  "Vienna",
  "Copenhagen",
  "Denver",
  "Edinburgh",
];
export const COMPANIES = [
  "Deloitte",
  "Siemens",
  "Spotify",
  "Unilever",
  "Accenture",
  "Shopify",
  "Atlassian",
  "Philips",
  "Zalando",
  "Novartis",
  "Canva",
  "Ericsson",
  "Heineken",
  "Bosch",
  "Airbus",
  "Adyen",
  "Stripe",
  "Maersk",
];
const JOBS = [
  "data analyst",
  "product designer",
  "backend engineer",
  "marketing manager",
  "accountant",
  "nurse",
  "project manager",
  "sales lead",
  "UX researcher",
  "civil engineer",
];
const RELATIONS = ["sister", "brother", "best friend", "cousin", "mother", "father"] as const;

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

export const monthName = (iso: string) => MONTHS[new Date(iso).getUTCMonth()];
const yearOf = (iso: string) => new Date(iso).getUTCFullYear();

/** A date-time between 2022-01-01 and 2024-12-20, at a whole hour (so sessions sort cleanly). */
function dateIn(r: Rng, from = Date.UTC(2022, 0, 1), to = Date.UTC(2024, 11, 20)): string {
  const hours = Math.floor((to - from) / 3_600_000);
  return new Date(from + r.int(hours) * 3_600_000).toISOString();
}

/** Facts and questions of one user, before sessions are cut (facts carry no session yet). */
interface Draft {
  facts: GoldFact[];
  questions: Omit<Question, "id" | "dataset">[];
}

export function generateFixture(seed: number, size: FixtureSize = FULL): Fixture {
  const names = rng(seed).sample(FIRST_NAMES, size.users);
  const users = names.map((name, u) => generateUser(rng(seed * 1000 + u + 1), `user-${u + 1}`, name, size));
  return { seed, now: BENCH_NOW, users };
}

function generateUser(r: Rng, dataset: string, name: string, size: FixtureSize): UserFixture {
  const draft: Draft = { facts: [], questions: [] };
  let n = 0;
  const add = (
    f: Omit<GoldFact, "id" | "dataset" | "subject" | "sessionId" | "confidence"> & { confidence?: number },
  ) => {
    const drawn = Math.round((0.75 + r.next() * 0.24) * 100) / 100;
    const fact: GoldFact = {
      ...f,
      confidence: f.confidence ?? drawn,
      id: `${dataset}/${++n}`,
      dataset,
      subject: "user",
      sessionId: "",
    };
    draft.facts.push(fact);
    return fact;
  };
  const ask = (kind: QuestionKind, query: string, gold: GoldFact[]) =>
    draft.questions.push({ kind, query, gold: gold.map((g) => g.id) });

  const people = r.sample(
    FIRST_NAMES.filter((p) => p !== name),
    size.relatives,
  );
  const cities = r.sample(CITIES, 3 + size.relatives);
  const companies = r.sample(COMPANIES, 3 + size.relatives);
  residences(r, add, ask, cities.slice(0, 3));
  jobs(r, add, ask, companies.slice(0, 3));
  relatives(r, add, ask, people, companies.slice(3), cities.slice(3));
  events(r, add, ask, size.events, cities);
  preferences(r, add, ask, size.preferences);
  fillers(r, add, ask, size.fillers);

  const sessions = cutSessions(r, dataset, draft.facts);
  const questions = withWholeMonths(draft).questions.map((q, i) => ({ ...q, id: `${dataset}/q${i + 1}`, dataset }));
  return { dataset, name, sessions, facts: draft.facts, questions };
}

const DATED = new Set(["lives_in", "works_at", TRIP.predicate, ...EVENTS.map((e) => e.predicate)]);

/** "What did I do in May 2023?": every dated life event of that month answers it. */
function withWholeMonths(draft: Draft): Draft {
  const questions = draft.questions.map((q) => {
    const month = /^What did I do in (\w+) (\d{4})\?$/.exec(q.query);
    if (!month) return q;
    const gold = draft.facts.filter(
      (f) => DATED.has(f.predicate) && monthName(f.validAt) === month[1] && String(yearOf(f.validAt)) === month[2],
    );
    return { ...q, gold: gold.map((f) => f.id) };
  });
  return { ...draft, questions };
}

type Add = (
  f: Omit<GoldFact, "id" | "dataset" | "subject" | "sessionId" | "confidence"> & { confidence?: number },
) => GoldFact;
type Ask = (kind: QuestionKind, query: string, gold: GoldFact[]) => void;

/** Three homes, each move superseding the last. */
function residences(r: Rng, add: Add, ask: Ask, cities: string[]) {
  const starts = [
    dateIn(r, Date.UTC(2022, 0, 1), Date.UTC(2022, 5, 1)),
    dateIn(r, Date.UTC(2023, 0, 1), Date.UTC(2023, 5, 1)),
    dateIn(r, Date.UTC(2024, 1, 1), Date.UTC(2024, 6, 1)),
  ];
  const quotes = [
    (c: string) => `I live in ${c} at the moment`,
    (c: string) => `we just moved to ${c}`,
    (c: string) => `we finally moved to ${c}`,
  ];
  const homes: GoldFact[] = [];
  cities.forEach((city, i) => {
    homes.push(
      add({
        predicate: "lives_in",
        object: city,
        objectIsEntity: true,
        sourceQuote: quotes[i](city),
        validAt: starts[i],
        supersedes: homes[i - 1]?.id,
        entities: [{ name: city, type: "PLACE" }],
      }),
    );
  });
  ask("single-hop", "Where do I live?", [homes[2]]);
  ask("temporal", `Where did I live before I moved to ${cities[2]}?`, [homes[1]]);
  ask("temporal", `When did I move to ${cities[1]}?`, [homes[1]]);
  ask("entity", `What do you know about my time in ${cities[0]}?`, [homes[0]]);
}

/** Three employers in turn; the last is current. */
function jobs(r: Rng, add: Add, ask: Ask, companies: string[]) {
  const titles = r.sample(JOBS, 3);
  const starts = [
    dateIn(r, Date.UTC(2022, 0, 1), Date.UTC(2022, 8, 1)),
    dateIn(r, Date.UTC(2023, 2, 1), Date.UTC(2023, 10, 1)),
    dateIn(r, Date.UTC(2024, 2, 1), Date.UTC(2024, 10, 1)),
  ];
  const quotes = [
    (c: string, t: string) => `I work at ${c} as a ${t}`,
    (c: string, t: string) => `I accepted an offer from ${c}, I start as a ${t} next month`,
    (c: string, t: string) => `I joined ${c} as a ${t}`,
  ];
  const held: GoldFact[] = [];
  companies.forEach((company, i) => {
    held.push(
      add({
        predicate: "works_at",
        object: `${company} as a ${titles[i]}`,
        objectIsEntity: false,
        sourceQuote: quotes[i](company, titles[i]),
        validAt: starts[i],
        supersedes: held[i - 1]?.id,
        entities: [{ name: company, type: "ORG" }],
      }),
    );
  });
  ask("single-hop", "Where do I work now?", [held[2]]);
  ask("temporal", `Which company did I work for before ${companies[2]}?`, [held[1]]);
  ask("temporal", "What was my first job?", [held[0]]);
  ask("entity", `What did I do at ${companies[1]}?`, [held[1]]);
}

/** A relative or friend: who they are, and where they work (the multi-hop fact). */
function relatives(r: Rng, add: Add, ask: Ask, people: string[], companies: string[], cities: string[]) {
  const relations = r.sample(RELATIONS, people.length);
  people.forEach((person, i) => {
    const relation = relations[i];
    const met = dateIn(r);
    const who = add({
      predicate: `has_${relation.replace(" ", "_")}`,
      object: person,
      objectIsEntity: true,
      sourceQuote: `my ${relation} ${person} is staying with us`,
      validAt: met,
      entities: [{ name: person, type: "PERSON" }],
    });
    const hop = add({
      predicate: "knows_that",
      object: `${person} works at ${companies[i]} in ${cities[i]}`,
      objectIsEntity: false,
      sourceQuote: `${person} got a job at ${companies[i]} in ${cities[i]}`,
      validAt: dateIn(r, new Date(met).getTime()),
      entities: [
        { name: person, type: "PERSON" },
        { name: companies[i], type: "ORG" },
        { name: cities[i], type: "PLACE" },
      ],
    });
    ask("multi-hop", `Where does my ${relation} work?`, [hop]);
    ask("multi-hop", `Which city is my ${relation} based in?`, [hop]);
    ask("single-hop", `What is my ${relation}'s name?`, [who]);
    ask("entity", `What do I know about ${person}?`, [who, hop]);
  });
}

/**
 * Dated events: three trips (one a year, so "last year" and "in 2022" each have one answer) and
 * one-off events, at most one per month so "what did I do in <month>?" has one answer.
 */
function events(r: Rng, add: Add, ask: Ask, count: number, homes: string[]) {
  const trips = r.sample(
    TRIP_PLACES.filter((p) => !homes.includes(p)),
    3,
  );
  const others = r.sample(EVENTS, Math.max(0, Math.min(count - 3, EVENTS.length)));
  // Month indexes from January 2022: trips take one month of each year, the others distinct months.
  const tripMonths = [r.int(12), 12 + r.int(12), 24 + r.int(11)];
  const otherMonths = r.sample(
    Array.from({ length: 35 }, (_, m) => m).filter((m) => !tripMonths.includes(m)),
    others.length,
  );
  const at = (month: number) => {
    const start = Date.UTC(2022, month, 1);
    return dateIn(r, start, start + 25 * 86_400_000);
  };
  const dated = [
    ...trips.map((place, i) => ({ event: TRIP, value: place, at: at(tripMonths[i]) })),
    ...others.map((event, i) => ({ event, value: r.pick(event.values), at: at(otherMonths[i]) })),
  ].slice(0, Math.max(count, 3));
  const tripFacts: GoldFact[] = [];
  for (const { event, value, at: when } of dated) {
    const fact = add({
      predicate: event.predicate,
      object: value,
      objectIsEntity: event.entityType !== undefined,
      sourceQuote: event.quote(value),
      validAt: when,
      entities: event.entityType ? [{ name: value, type: event.entityType }] : [],
    });
    if (event === TRIP) {
      tripFacts.push(fact);
      ask("entity", `Have I ever been to ${value}?`, [fact]);
    }
    ask("temporal", event.when(value), [fact]);
    ask("temporal", `What did I do in ${monthName(when)} ${yearOf(when)}?`, [fact]);
  }
  ask("temporal", "Where did I travel last year?", [tripFacts[2]]);
  ask("temporal", "Which country did I visit in 2022?", [tripFacts[0]]);
}

function preferences(r: Rng, add: Add, ask: Ask, count: number) {
  const chosen = r.sample(PREFERENCES, Math.min(count, PREFERENCES.length));
  chosen.forEach((p, i) => {
    const value = r.pick(p.values);
    const fact = add({
      predicate: p.predicate,
      object: value,
      objectIsEntity: false,
      sourceQuote: p.quote(value),
      validAt: dateIn(r),
      entities: [],
    });
    // Every other one as a paraphrase (no content word shared), the rest asked directly.
    if (i % 2 === 0) ask("paraphrase", p.paraphrase, [fact]);
    else ask("single-hop", p.direct, [fact]);
  });
}

function fillers(r: Rng, add: Add, ask: Ask, count: number) {
  const byPredicate = new Map<string, GoldFact[]>();
  const used = new Set<string>();
  for (let i = 0; i < count; i++) {
    const f = FILLERS[i % FILLERS.length];
    const free = f.values.filter((v) => !used.has(`${f.predicate}:${v}`));
    if (free.length === 0) continue;
    const value = r.pick(free);
    used.add(`${f.predicate}:${value}`);
    const fact = add({
      predicate: f.predicate,
      object: value,
      objectIsEntity: false,
      sourceQuote: f.quote(value),
      validAt: dateIn(r),
      entities: [],
      confidence: i % 11 === 10 ? 0.6 : undefined,
    });
    byPredicate.set(f.predicate, [...(byPredicate.get(f.predicate) ?? []), fact]);
  }
  // One direct question per filler kind held: any fact of that kind answers it.
  for (const f of FILLERS) {
    const held = byPredicate.get(f.predicate);
    if (held) ask("single-hop", f.question, held);
  }
}

/**
 * Sessions: the facts in time order, 2 to 5 per session, each said in a user message of its own
 * (with chit-chat around it and an assistant reply), the session dated just after its last fact.
 */
function cutSessions(r: Rng, dataset: string, facts: GoldFact[]): Session[] {
  const ordered = [...facts].sort((a, b) => a.validAt.localeCompare(b.validAt) || a.id.localeCompare(b.id));
  const sessions: Session[] = [];
  for (let i = 0; i < ordered.length; ) {
    const take = ordered.slice(i, i + 2 + r.int(4));
    i += take.length;
    const id = `${dataset}/s${sessions.length + 1}`;
    const start = new Date(take.at(-1)?.validAt as string).getTime() + 86_400_000 + r.int(10) * 3_600_000;
    const lines: { role: "user" | "assistant"; content: string }[] = [];
    lines.push({ role: "user", content: r.pick(OPENERS) }, { role: "assistant", content: r.pick(REPLIES) });
    for (const fact of take) {
      fact.sessionId = id;
      lines.push(
        { role: "user", content: `${r.pick(LEADS)} ${fact.sourceQuote}. ${r.pick(TAILS)}`.trim() },
        { role: "assistant", content: r.pick(REPLIES) },
      );
    }
    lines.push({ role: "user", content: r.pick(CLOSERS) }, { role: "assistant", content: "Any time!" });
    sessions.push({
      id,
      dataset,
      createdAt: new Date(start).toISOString(),
      messages: lines.map((l, k) => ({ ...l, createdAt: new Date(start + k * 45_000).toISOString() })),
      factIds: take.map((f) => f.id),
      summary: `The user shared ${take.length} things about their life, among them that they ${take[0].predicate.replace(/_/g, " ")} ${take[0].object}.`,
    });
  }
  return sessions;
}

const OPENERS = [
  "Hey, got a minute?",
  "Morning! Quick chat before work.",
  "Hi again.",
  "Can I think out loud for a bit?",
  "Hello, I have a few updates.",
];
const LEADS = ["By the way,", "Oh, and", "So,", "Funny thing:", "Just so you know,", "Anyway,"];
const TAILS = [
  "Not sure why I'm telling you this.",
  "It's been on my mind.",
  "Anyway, that's that.",
  "Make of that what you will.",
  "It feels like a big deal.",
  "",
];
const REPLIES = [
  "Thanks for sharing that with me.",
  "That sounds meaningful, tell me more if you like.",
  "Got it, I'll keep that in mind.",
  "Interesting! How do you feel about it?",
  "Noted.",
];
const CLOSERS = ["OK, that's all for now.", "Thanks, talk later.", "I have to run, bye!"];

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decideFacts,
  ENTITY_NAME_MAX,
  factLinks,
  invalidations,
  judgeInput,
  type KeptFact,
  type ProposedFact,
  quotingSeqs,
  resolveEntities,
  type StoredNeighbour,
  screenEntities,
  screenFacts,
  stableId,
} from "./candidates";
import { DROP_REASONS, tallyReport } from "./report";

const SAID_AT = "2024-05-01T10:00:00.000Z";
const lines = [
  { content: "I live in Lisbon. My sister lives in Porto.", created_at: SAID_AT },
  { content: "I  work at  ‘Acme’ Corp.", created_at: "2024-05-01T10:01:00.000Z" },
];

function proposed(more: Partial<ProposedFact> = {}): ProposedFact {
  return {
    subject: "user",
    predicate: "lives_in",
    object: "Lisbon",
    objectIsEntity: false,
    confidence: 0.9,
    sourceQuote: "I live in Lisbon",
    validAt: null,
    ...more,
  };
}

describe("screenFacts", () => {
  it("keeps claims about the user quoted from the user, stored with subject user, and gives every other one a reason", () => {
    const { kept, drops } = screenFacts(
      [
        proposed({ subject: "I" }),
        proposed({
          subject: "sister",
          predicate: "lives_in",
          object: "Porto",
          sourceQuote: "My sister lives in Porto",
        }),
        proposed({ predicate: "works_at", object: "Acme Corp", sourceQuote: "i work at 'acme' corp", subject: "Me" }),
        proposed({ predicate: "likes", object: "jazz", sourceQuote: "I adore jazz" }),
        proposed({ predicate: "likes", object: "nothing", sourceQuote: "" }),
        proposed({ predicate: "  " }),
        proposed({ subject: "" }),
        proposed({ subject: "The user", predicate: "LIVES_IN", object: "lisbon" }),
        proposed({ subject: "Ana", predicate: "born_in", object: "Porto", sourceQuote: "My sister lives in Porto" }),
      ],
      lines,
      ["Ana"],
    );
    expect(kept.map((f) => [f.ordinal, f.subject, f.predicate, f.object])).toEqual([
      [0, "user", "lives_in", "Lisbon"],
      [2, "user", "works_at", "Acme Corp"],
      [8, "user", "born_in", "Porto"],
    ]);
    expect(drops).toEqual(["notAboutUser", "quoteNotFound", "quoteNotFound", "emptyPart", "emptyPart", "duplicate"]);
    // No stated time: the time of the user line that holds the quote.
    expect(kept[1].validAt.toISOString()).toBe("2024-05-01T10:01:00.000Z");
  });

  it("keeps the more confident of a claim stated twice, in its place; the earlier on a tie", () => {
    const { kept, drops } = screenFacts(
      [
        proposed({ confidence: 0.3 }),
        proposed({ predicate: "works_at", object: "Acme Corp", sourceQuote: "i work at 'acme' corp", confidence: 0.8 }),
        proposed({ predicate: "LIVES_IN", object: "lisbon", confidence: 0.95 }),
        proposed({ predicate: "works_at", object: "acme corp", sourceQuote: "i work at 'acme' corp", confidence: 0.8 }),
      ],
      lines,
      [],
    );
    expect(kept.map((f) => [f.ordinal, f.predicate, f.object, f.confidence])).toEqual([
      [2, "LIVES_IN", "lisbon", 0.95],
      [1, "works_at", "Acme Corp", 0.8],
    ]);
    expect(drops).toEqual(["duplicate", "duplicate"]);
  });

  it("takes a stated validAt, ignores an unreadable one, and clamps confidence into 0-1", () => {
    const { kept } = screenFacts(
      [
        proposed({ validAt: "2023-03-01", confidence: 7 }),
        proposed({
          predicate: "works_at",
          object: "Acme",
          sourceQuote: "work at acme",
          validAt: "soon",
          confidence: -1,
        }),
      ],
      lines,
      [],
    );
    expect(kept.map((f) => [f.validAt.toISOString(), f.confidence])).toEqual([
      ["2023-03-01T00:00:00.000Z", 1],
      ["2024-05-01T10:01:00.000Z", 0],
    ]);
  });

  it("ignores a stated validAt outside years 0001-9999, which the timestamptz column cannot take", () => {
    const stated = ["0000-06-01", "+275760-09-13T00:00:00Z", "20000-01-01", "0001-01-01", "9999-12-31"];
    const { kept } = screenFacts(
      stated.map((validAt, i) => proposed({ object: `Lisbon ${i}`, validAt })),
      [{ content: "I live in Lisbon", created_at: SAID_AT }],
      [],
    );
    expect(kept.map((f) => f.validAt.toISOString())).toEqual([
      SAID_AT,
      SAID_AT,
      SAID_AT,
      "0001-01-01T00:00:00.000Z",
      "9999-12-31T00:00:00.000Z",
    ]);
  });
});

describe("quotingSeqs", () => {
  const lines = [
    { seq: 1, content: "I live in “Lisbon”,   near the river." },
    { seq: 3, content: "Work is fine." },
    { seq: 5, content: "i LIVE in lisbon now" },
  ];

  it("finds every user line holding the quote, compared as the quote check compares", () => {
    expect(quotingSeqs("I live in Lisbon", lines)).toEqual([1, 5]);
    expect(quotingSeqs("work is fine", lines)).toEqual([3]);
  });

  it("finds none for a quote no line holds, or an empty one", () => {
    expect(quotingSeqs("I live in Porto", lines)).toEqual([]);
    expect(quotingSeqs("  “” ", lines)).toEqual([]);
  });
});

describe("screenEntities", () => {
  it("drops blank names and repeats of the same type and name", () => {
    expect(
      screenEntities([
        { name: " Lisbon ", type: "PLACE" },
        { name: "lisbon", type: "PLACE" },
        { name: "Lisbon", type: "ORG" },
        { name: "  ", type: "PERSON" },
      ]),
    ).toEqual([
      { name: "Lisbon", type: "PLACE" },
      { name: "Lisbon", type: "ORG" },
    ]);
  });

  it("drops a name longer than ENTITY_NAME_MAX characters (a sentence, not a name)", () => {
    const longest = "A".repeat(ENTITY_NAME_MAX);
    expect(
      screenEntities([
        { name: longest, type: "ORG" },
        { name: `${longest}B`, type: "ORG" },
      ]),
    ).toEqual([{ name: longest, type: "ORG" }]);
  });
});

const kept = (predicate: string, object: string, ordinal: number, confidence = 0.9): KeptFact => ({
  ordinal,
  subject: "user",
  predicate,
  object,
  objectIsEntity: false,
  confidence,
  sourceQuote: `${predicate} ${object}`,
  validAt: new Date(`2024-01-0${ordinal + 1}T00:00:00.000Z`),
});
const near = (i: number, id: string, sim: number): StoredNeighbour => ({
  i,
  id,
  subject: "user",
  predicate: "lives_in",
  object: id,
  sim,
});
const S = { factDedupThreshold: 0.9, retrievalMinConfidence: 0.5 };

describe("decideFacts", () => {
  it("drops a duplicate of a live fact or of an earlier accepted one, and pairs the rest with their neighbours", () => {
    const facts = [kept("moved_to", "Lisbon", 0), kept("lives_in", "Paris", 1), kept("likes", "tea", 2, 0.2)];
    const found = {
      facts: [near(1, "fct_paris", 0.6), near(2, "fct_same", 0.95), near(3, "fct_coffee", 0.7)],
      twins: [],
    };
    const d = decideFacts(facts, [[1], [2], [3]], found, S, "epi_1");
    expect(d.accepted.map((f) => [f.object, f.id, f.embedding])).toEqual([
      ["Lisbon", stableId("fct", "epi_1", "0"), [1]],
      ["tea", stableId("fct", "epi_1", "2"), [3]],
    ]);
    expect(d.drops).toEqual(["duplicate"]);
    // The low-confidence fact is kept but never judged.
    expect(d.pairs).toEqual([{ pair: 1, oldId: "fct_paris", old: "user lives_in fct_paris", newIndex: 0 }]);
    expect(judgeInput(d.pairs, d.accepted)).toBe("Pair 1:\nOLD: user lives_in fct_paris\nNEW: user moved_to Lisbon");
  });

  it("keeps the first of two twins of the batch, and a twin of a dropped fact", () => {
    const facts = [kept("a", "1", 0), kept("b", "2", 1), kept("c", "3", 2)];
    // 1 is a duplicate of a live fact; 2 twins 1 (dropped), so 2 stays; 3 twins 2 (kept), so 3 goes.
    const found = {
      facts: [near(1, "fct_x", 0.99)],
      twins: [
        { i: 1, j: 2 },
        { i: 2, j: 3 },
      ],
    };
    const d = decideFacts(facts, [[1], [2], [3]], found, S, "epi_1");
    expect(d.accepted.map((f) => f.predicate)).toEqual(["b"]);
    expect(d.drops).toEqual(["duplicate", "duplicate"]);
  });
});

describe("invalidations", () => {
  it("gives each contradicted old fact the new facts that contradict it, and ignores unknown pairs", () => {
    const accepted = [kept("moved_to", "Lisbon", 2), kept("moved_to", "Rome", 0)].map((f) => ({
      ...f,
      id: `fct_${f.object}`,
      embedding: [],
    }));
    const pairs = [
      { pair: 1, oldId: "fct_paris", old: "", newIndex: 0 },
      { pair: 2, oldId: "fct_paris", old: "", newIndex: 1 },
      { pair: 3, oldId: "fct_tea", old: "", newIndex: 0 },
    ];
    const ended = invalidations(
      pairs,
      [
        { pair: 1, contradicts: true },
        { pair: 2, contradicts: true },
        { pair: 3, contradicts: false },
        { pair: 9, contradicts: true },
      ],
      accepted,
    );
    expect([...ended].map(([id, by]) => [id, by.map((e) => [e.newId, e.until.toISOString()])])).toEqual([
      [
        "fct_paris",
        [
          ["fct_Lisbon", "2024-01-03T00:00:00.000Z"],
          ["fct_Rome", "2024-01-01T00:00:00.000Z"],
        ],
      ],
    ]);
  });
});

describe("resolveEntities and factLinks", () => {
  it("merges into a same-named or close entity, creates the others, and links facts by object and subject", () => {
    const now = new Date("2024-05-01T00:00:00.000Z");
    const r = resolveEntities(
      [
        { name: "lisbon", type: "PLACE" },
        { name: "Acme", type: "ORG" },
        { name: "Initech", type: "ORG" },
      ],
      [[1], [2], [3]],
      [
        { i: 1, id: "ent_lisbon", sim: 1, sameName: true },
        { i: 2, id: "ent_acme_inc", sim: 0.5, sameName: false },
        { i: 3, id: "ent_initech", sim: 0.95, sameName: false },
      ],
      0.9,
      { projectId: "prj_1", dataset: "ds", now },
    );
    const acme = stableId("ent", "prj_1", "ds", "ORG", "acme");
    expect(r.named).toEqual([
      { name: "lisbon", id: "ent_lisbon" },
      { name: "acme", id: acme },
      { name: "initech", id: "ent_initech" },
    ]);
    expect(r.rows).toEqual([
      { id: acme, projectId: "prj_1", dataset: "ds", name: "Acme", type: "ORG", embedding: [2], createdAt: now },
    ]);
    const accepted = [kept("lives_in", "Lisbon", 0), kept("likes", "tea", 1)].map((f) => ({
      ...f,
      id: `fct_${f.object}`,
      embedding: [],
    }));
    expect(factLinks(accepted, r.named)).toEqual([{ factId: "fct_Lisbon", entityId: "ent_lisbon" }]);
  });

  it("merges a new entity into an earlier new one of its type above the threshold, and keeps a name's two types apart", () => {
    const now = new Date("2024-05-01T00:00:00.000Z");
    const r = resolveEntities(
      [
        { name: "Acme Corp", type: "ORG" },
        { name: "Acme Corporation", type: "ORG" },
        { name: "Acme Rocket", type: "PRODUCT" },
        { name: "Apple", type: "ORG" },
        { name: "Apple", type: "PRODUCT" },
      ],
      [
        [1, 0, 0],
        [0.99, 0.1, 0],
        [0.99, 0.1, 0],
        [0, 1, 0],
        [0, 1, 0],
      ],
      [],
      0.9,
      { projectId: "prj_1", dataset: "ds", now },
    );
    const id = (type: string, name: string) => stableId("ent", "prj_1", "ds", type, name);
    expect(r.rows.map((e) => `${e.name} (${e.type})`)).toEqual([
      "Acme Corp (ORG)",
      "Acme Rocket (PRODUCT)",
      "Apple (ORG)",
      "Apple (PRODUCT)",
    ]);
    expect(r.named).toEqual([
      { name: "acme corp", id: id("ORG", "acme corp") },
      { name: "acme corporation", id: id("ORG", "acme corp") },
      { name: "acme rocket", id: id("PRODUCT", "acme rocket") },
      { name: "apple", id: id("ORG", "apple") },
      { name: "apple", id: id("PRODUCT", "apple") },
    ]);
    const works = { ...kept("works_at", "Apple", 0), id: "fct_apple", embedding: [] };
    expect(factLinks([works], r.named).map((l) => l.entityId)).toEqual([id("ORG", "apple"), id("PRODUCT", "apple")]);
  });
});

describe("factLinks", () => {
  const fact = (id: string, object: string, subject = "user") =>
    ({ ...kept("knows_that", object, 0), id, subject, embedding: [] }) as Parameters<typeof factLinks>[0][number];
  const idByName = [
    { name: "noor", id: "ent_noor" },
    { name: "bosch", id: "ent_bosch" },
    { name: "new york", id: "ent_ny" },
    { name: "go", id: "ent_go" },
    { name: "café zoë", id: "ent_cafe" },
  ];

  it("links a fact to every entity its object or subject names, whole or as whole words within it", () => {
    expect(factLinks([fact("f1", "Noor works at Bosch in New York")], idByName)).toEqual([
      { factId: "f1", entityId: "ent_noor" },
      { factId: "f1", entityId: "ent_bosch" },
      { factId: "f1", entityId: "ent_ny" },
    ]);
    expect(factLinks([fact("f2", "Bosch", "Noor")], idByName).map((l) => l.entityId)).toEqual([
      "ent_noor",
      "ent_bosch",
    ]);
    expect(factLinks([fact("f3", "coffee at Café Zoë, daily")], idByName).map((l) => l.entityId)).toEqual(["ent_cafe"]);
  });

  it("never links a name found only inside a longer word, and once per entity", () => {
    expect(factLinks([fact("f4", "going to Boschberg and Yorkshire")], idByName)).toEqual([]);
    expect(factLinks([fact("f5", "Noor and noor again")], idByName)).toEqual([{ factId: "f5", entityId: "ent_noor" }]);
  });
});

describe("the report", () => {
  const subjects = ["user", "I", "me", "The user", "Ana", "sister", "", "  "];
  const quotes = ["I live in Lisbon", "i work at 'acme' corp", "made up", ""];
  const words = ["lives_in", "Lisbon", "", " ", "works_at", "Acme Corp"];
  const arbitraryFact = fc.record({
    subject: fc.constantFrom(...subjects),
    predicate: fc.constantFrom(...words),
    object: fc.constantFrom(...words),
    objectIsEntity: fc.boolean(),
    confidence: fc.double({ min: -1, max: 2, noNaN: true }),
    sourceQuote: fc.constantFrom(...quotes),
    validAt: fc.constantFrom(null, "2024-01-01", "not a date"),
  });

  it("accounts for every proposed fact: proposed = kept + the sum of dropped, kept = what is written", () => {
    fc.assert(
      fc.property(
        fc.array(arbitraryFact, { maxLength: 25 }),
        fc.array(fc.tuple(fc.nat(30), fc.double({ min: 0, max: 1, noNaN: true })), { maxLength: 30 }),
        fc.array(fc.tuple(fc.nat(30), fc.nat(30)), { maxLength: 30 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (facts, neighbours, twinPairs, threshold) => {
          const screened = screenFacts(facts, lines, ["Ana"]);
          const found = {
            facts: neighbours.map(([i, sim], n) => near(i + 1, `fct_${n}`, sim)),
            twins: twinPairs.filter(([a, b]) => a < b).map(([a, b]) => ({ i: a + 1, j: b + 1 })),
          };
          const vectors = screened.kept.map(() => [0]);
          const decided = decideFacts(screened.kept, vectors, found, { ...S, factDedupThreshold: threshold }, "e");
          const report = tallyReport(facts.length, [...screened.drops, ...decided.drops]);
          const dropped = DROP_REASONS.reduce((sum, r) => sum + report.dropped[r], 0);
          expect(report.proposed).toBe(facts.length);
          expect(report.kept + dropped).toBe(report.proposed);
          expect(report.kept).toBe(decided.accepted.length);
          expect(report.dropped.lowConfidence).toBe(0);
          for (const f of decided.accepted) expect(f.subject).toBe("user");
        },
      ),
      { numRuns: 500 },
    );
  });
});

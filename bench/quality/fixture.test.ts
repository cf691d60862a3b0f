import { describe, expect, it } from "vitest";
import { STOP_WORDS, terms } from "./bm25";
import { FULL, generateFixture, QUESTION_KINDS, QUICK, TINY } from "./fixture";
import { PREFERENCES } from "./templates";

const normalise = (s: string) =>
  s
    .toLowerCase()
    .replace(/[\u2018\u2019\u201c\u201d"'`]/g, "")
    .replace(/\s+/g, " ")
    .trim();

describe("the quality fixture", () => {
  const full = generateFixture(42, FULL);
  const facts = full.users.flatMap((u) => u.facts);
  const questions = full.users.flatMap((u) => u.questions);

  it("is the same for the same seed, and another for another seed", () => {
    expect(JSON.stringify(generateFixture(42, FULL))).toBe(JSON.stringify(full));
    expect(JSON.stringify(generateFixture(43, FULL))).not.toBe(JSON.stringify(full));
  });

  it("has the sizes the issue asks for, every kind of question, and smaller quick and tiny versions", () => {
    expect(facts.length).toBeGreaterThanOrEqual(600);
    expect(questions.length).toBeGreaterThanOrEqual(400);
    for (const kind of QUESTION_KINDS) expect(questions.filter((q) => q.kind === kind).length).toBeGreaterThan(20);
    const quick = generateFixture(42, QUICK).users.flatMap((u) => u.facts).length;
    const tiny = generateFixture(42, TINY).users.flatMap((u) => u.facts).length;
    expect(quick).toBeLessThan(facts.length);
    expect(tiny).toBeLessThanOrEqual(25);
  });

  it("quotes every fact from a user message of its own session, said after the fact became true", () => {
    for (const user of full.users) {
      const sessions = new Map(user.sessions.map((s) => [s.id, s]));
      for (const fact of user.facts) {
        const session = sessions.get(fact.sessionId);
        expect(session, fact.id).toBeDefined();
        expect(session?.factIds).toContain(fact.id);
        const said = session?.messages
          .filter((m) => m.role === "user")
          .some((m) => normalise(m.content).includes(normalise(fact.sourceQuote)));
        expect(said, `${fact.id}: ${fact.sourceQuote}`).toBe(true);
        expect(fact.subject).toBe("user");
        expect(fact.validAt < (session?.createdAt ?? "")).toBe(true);
      }
    }
  });

  it("keeps every date in 2022-2024, before the bench's now, and messages in order", () => {
    for (const user of full.users) {
      for (const fact of user.facts) expect(fact.validAt >= "2022-01-01" && fact.validAt < "2025-01-01").toBe(true);
      const times = user.sessions.flatMap((s) => s.messages.map((m) => m.createdAt));
      expect([...times].sort()).toEqual(times);
      expect((times.at(-1) ?? "") < full.now).toBe(true);
    }
  });

  it("names existing gold facts of the question's own user, and one fact per predicate and object", () => {
    for (const user of full.users) {
      const ids = new Set(user.facts.map((f) => f.id));
      for (const q of user.questions) {
        expect(q.gold.length, q.query).toBeGreaterThan(0);
        for (const g of q.gold) expect(ids.has(g), `${q.id} ${g}`).toBe(true);
      }
      const keys = user.facts.map((f) => `${f.predicate}\u0000${f.object}`);
      expect(new Set(keys).size).toBe(keys.length);
    }
  });

  it("supersedes only an earlier fact of the same predicate, and asks about the current one by default", () => {
    for (const user of full.users) {
      const byId = new Map(user.facts.map((f) => [f.id, f]));
      for (const fact of user.facts.filter((f) => f.supersedes)) {
        const old = byId.get(fact.supersedes as string);
        expect(old?.predicate).toBe(fact.predicate);
        expect((old?.validAt ?? "") < fact.validAt).toBe(true);
      }
      const home = user.questions.find((q) => q.query === "Where do I live?");
      const current = user.facts.filter((f) => f.predicate === "lives_in").at(-1);
      expect(home?.gold).toEqual([current?.id]);
    }
  });

  it("words paraphrase questions with no content word of the fact or its quote", () => {
    const paraphrases = questions.filter((q) => q.kind === "paraphrase");
    expect(paraphrases.length).toBeGreaterThan(0);
    for (const q of paraphrases) {
      const fact = facts.find((f) => f.id === q.gold[0]);
      const said = new Set(terms(`${fact?.predicate} ${fact?.object} ${fact?.sourceQuote}`));
      const shared = terms(q.query).filter((t) => said.has(t));
      expect(shared, `${q.query} / ${fact?.sourceQuote}`).toEqual([]);
    }
    // And over every value of every template, not just the ones this seed drew.
    for (const p of PREFERENCES) {
      for (const value of p.values) {
        const said = new Set(terms(`${p.predicate} ${value} ${p.quote(value)}`));
        expect(
          terms(p.paraphrase).filter((t) => said.has(t) && !STOP_WORDS.has(t)),
          p.paraphrase,
        ).toEqual([]);
      }
    }
  });
});

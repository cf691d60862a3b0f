import { describe, expect, it } from "vitest";
import { isNamePredicate, isUserSubject, subjectKey, userNames } from "./subject";

describe("isUserSubject", () => {
  it("accepts the ways a model names the user, whatever the case and surrounding punctuation", () => {
    for (const subject of [
      "user",
      "User",
      " USER ",
      "the user",
      "The User",
      "this user",
      "I",
      "i",
      "me",
      "Me",
      "myself",
      "my",
      "mine",
      '"user"',
      "'I'",
      "(me)",
      "the  user.",
      "“The user”",
      "[user]",
    ]) {
      expect(isUserSubject(subject), subject).toBe(true);
    }
  });

  it("refuses someone or something else, possessives of the user included", () => {
    for (const subject of [
      "",
      "  ",
      "sister",
      "user's sister",
      "my sister",
      "the user's employer",
      "users",
      "assistant",
      "you",
      "we",
      "Lisbon",
      "i am",
      "us",
    ]) {
      expect(isUserSubject(subject), subject).toBe(false);
    }
  });

  it("accepts the user's names, full or first word, and no other name", () => {
    const names = ["Ana Lima", "Bob"];
    expect(isUserSubject("Ana Lima", names)).toBe(true);
    expect(isUserSubject("ana lima", names)).toBe(true);
    expect(isUserSubject("Ana", names)).toBe(true);
    expect(isUserSubject("Bob.", names)).toBe(true);
    expect(isUserSubject("Lima", names)).toBe(false);
    expect(isUserSubject("Carol", names)).toBe(false);
    expect(isUserSubject("Ana", [])).toBe(false);
    // A blank name never matches a blank subject.
    expect(isUserSubject("", ["  "])).toBe(false);
  });
});

describe("subjectKey", () => {
  it("lower-cases, collapses spaces and trims punctuation at both ends only", () => {
    expect(subjectKey('  "The   User" ')).toBe("the user");
    expect(subjectKey("user's sister!")).toBe("user's sister");
    expect(subjectKey("...")).toBe("");
  });
});

describe("isNamePredicate", () => {
  it("reads the predicates that state a name", () => {
    for (const p of [
      "name",
      "has_name",
      "is_named",
      "name_is",
      "is called",
      "goes_by",
      "first_name",
      "Full-Name",
      "nickname",
    ]) {
      expect(isNamePredicate(p), p).toBe(true);
    }
    for (const p of [
      "lives_in",
      "named_after",
      "pet_name",
      "has_named_child",
      "works_at",
      "called",
      "named",
      "has_called",
    ]) {
      expect(isNamePredicate(p), p).toBe(false);
    }
  });
});

describe("userNames", () => {
  it("takes a self-introduction from the user's lines, a proposed name fact and the stored names", () => {
    expect(
      userNames({
        userLines: ["Hi, my name is Ana Lima and I live in Porto.", "Call me Bob", "I'm called Zé."],
        proposed: [
          { subject: "I", predicate: "has_name", object: " Carol " },
          { subject: "sister", predicate: "name", object: "Dora" },
          { subject: "user", predicate: "lives_in", object: "Porto" },
        ],
        stored: ["Eve", "Ana Lima"],
      }),
    ).toEqual(["Ana Lima", "Bob", "Zé", "Carol", "Eve"]);
  });

  it("needs a capitalised name after the introduction", () => {
    expect(userNames({ userLines: ["call me later", "my name is not important"], proposed: [], stored: [] })).toEqual(
      [],
    );
  });
});

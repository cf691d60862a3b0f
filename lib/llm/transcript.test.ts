import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { ProviderError } from "../errors";
import {
  cutText,
  fitTexts,
  fittingPrefix,
  lengthCap,
  MIN_MESSAGE_CHARS,
  renderTranscript,
  TRANSCRIPT_BUDGET_CHARS,
  withTranscriptBudget,
} from "./transcript";

const refused = (status = 400) =>
  new ProviderError("Model call failed", {
    cause: OpenAI.APIError.generate(status, { error: { message: "maximum context length" } }, "no", new Headers()),
  });

describe("lengthCap and fitTexts", () => {
  it("keep every text whole when they fit", () => {
    expect(lengthCap([10, 20, 30], 60)).toBe(Number.POSITIVE_INFINITY);
    expect(fitTexts(["a", "bb"], 3)).toEqual(["a", "bb"]);
  });

  it("cut only the longest, to one length, the total within the budget", () => {
    // 100 + 200 whole, the two long ones 350 each: 1,000.
    expect(lengthCap([100, 5_000, 200, 90_000], 1_000)).toBe(350);
    const texts = ["x".repeat(300), "y".repeat(5_000), "z".repeat(2_000)];
    const fitted = fitTexts(texts, 2_000);
    expect(fitted[0]).toBe(texts[0]);
    expect(fitted[1]).toMatch(/^y{850} \[\.\.\. 4150 more characters\]$/);
    expect(fitted[2]).toMatch(/^z{850} \[\.\.\. 1150 more characters\]$/);
  });

  it("never cut a text below MIN_MESSAGE_CHARS, however small the budget", () => {
    const fitted = fitTexts(["a".repeat(1_000), "b".repeat(1_000)], 10);
    expect(fitted.map((t) => t.indexOf(" ["))).toEqual([MIN_MESSAGE_CHARS, MIN_MESSAGE_CHARS]);
  });
});

describe("cutText", () => {
  it("ends the head between graphemes and says how much was left", () => {
    expect(cutText("short", 10)).toBe("short");
    expect(cutText(`${"a".repeat(9)}👍🏽 and more`, 10)).toBe(`${"a".repeat(9)} [... 13 more characters]`);
  });
});

describe("fittingPrefix", () => {
  it("is every text when they fit, else the most first ones that fit uncut below the floor, at least one", () => {
    expect(fittingPrefix([100, 100, 100], 1_000)).toBe(3);
    // Three need 600 at the floor of 200 each; two fit in 500.
    expect(fittingPrefix([1_000, 1_000, 1_000], 500)).toBe(2);
    expect(fittingPrefix([1_000_000], 100)).toBe(1);
    expect(fittingPrefix([], 100)).toBe(0);
  });
});

describe("renderTranscript", () => {
  it("cuts a long message to fit the budget and keeps the spec's head and tail by count", () => {
    const messages = [
      { seq: 1, role: "user", content: "I live in Lisbon." },
      { seq: 2, role: "user", content: "log ".repeat(250_000) },
      { seq: 3, role: "user", content: "I work as a nurse." },
    ];
    const text = renderTranscript(messages, 100);
    expect(text.length).toBeLessThan(TRANSCRIPT_BUDGET_CHARS + 200);
    expect(text).toContain("[1] user: I live in Lisbon.");
    expect(text).toContain("[3] user: I work as a nurse.");
    expect(text).toMatch(/\n\[2\] user: log log .* \[\.\.\. \d+ more characters\]\n\[3\]/);
  });
});

describe("withTranscriptBudget", () => {
  it("calls at the full budget, halving it after each refusal for length, up to an eighth", async () => {
    const budgets: number[] = [];
    const answer = await withTranscriptBudget(async (budget) => {
      budgets.push(budget);
      if (budget > TRANSCRIPT_BUDGET_CHARS / 4) throw refused(400);
      return "ok";
    });
    expect(answer).toBe("ok");
    expect(budgets).toEqual([TRANSCRIPT_BUDGET_CHARS, TRANSCRIPT_BUDGET_CHARS / 2, TRANSCRIPT_BUDGET_CHARS / 4]);
  });

  it("throws the last refusal at an eighth, and any other failure at once", async () => {
    const budgets: number[] = [];
    await expect(
      withTranscriptBudget(async (budget) => {
        budgets.push(budget);
        throw refused(422);
      }),
    ).rejects.toThrow("Model call failed");
    expect(budgets).toHaveLength(4);
    let calls = 0;
    await expect(
      withTranscriptBudget(async () => {
        calls++;
        throw refused(500);
      }),
    ).rejects.toThrow();
    expect(calls).toBe(1);
  });
});

import type { LanguageModelV4Prompt } from "@ai-sdk/provider";
import { describe, expect, it } from "vitest";
import { latestUserText, withSystemMessage } from "./ai-sdk";

const text = (t: string) => ({ type: "text" as const, text: t });

describe("latestUserText", () => {
  it("is the last message's text when the user sent it, its text parts joined", () => {
    const prompt: LanguageModelV4Prompt = [
      { role: "system", content: "Be brief." },
      { role: "user", content: [text("first")] },
      { role: "assistant", content: [text("ok")] },
      { role: "user", content: [text("Where do I live?"), text("And work?")] },
    ];
    expect(latestUserText(prompt)).toBe("Where do I live?\nAnd work?");
  });

  it("is undefined for a tool step or a message without text: no recall, nothing appended", () => {
    expect(
      latestUserText([
        { role: "user", content: [text("weather?")] },
        { role: "tool", content: [] },
      ]),
    ).toBeUndefined();
    expect(latestUserText([{ role: "user", content: [text("  ")] }])).toBeUndefined();
    expect(latestUserText([])).toBeUndefined();
  });
});

describe("withSystemMessage", () => {
  it("puts the block after the prompt's own system messages", () => {
    const prompt: LanguageModelV4Prompt = [
      { role: "system", content: "Be brief." },
      { role: "user", content: [text("hi")] },
    ];
    expect(withSystemMessage(prompt, "FACTS").map((m) => m.role)).toEqual(["system", "system", "user"]);
    expect(withSystemMessage(prompt, "FACTS")[1]).toEqual({ role: "system", content: "FACTS" });
    expect(withSystemMessage([{ role: "user", content: [text("hi")] }], "FACTS")[0].content).toBe("FACTS");
    expect(prompt).toHaveLength(2);
  });
});

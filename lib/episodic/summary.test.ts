import { describe, expect, it } from "vitest";
import { DEFAULT_SETTINGS, type Settings } from "../settings/settings";
import { semanticStatusAfterSummary, summaryInput } from "./summary";

const withEpisodic = (over: Partial<Settings["episodic"]>): Settings => ({
  ...DEFAULT_SETTINGS,
  episodic: { ...DEFAULT_SETTINGS.episodic, ...over },
});

describe("summaryInput", () => {
  it("renders the transcript one line each, cut to the episode's maxMessages", () => {
    const transcript = [1, 2, 3, 4].map((seq) => ({ seq, role: "user", content: `m${seq}` }));
    expect(summaryInput(transcript, withEpisodic({ maxMessages: 10 }))).toBe(
      "[1] user: m1\n[2] user: m2\n[3] user: m3\n[4] user: m4",
    );
    expect(summaryInput(transcript, withEpisodic({ maxMessages: 2 }))).toBe(
      "[1] user: m1\n[... 2 messages omitted ...]\n[4] user: m4",
    );
  });

  it("refuses an episode without messages (it is marked failed, no model call)", () => {
    expect(() => summaryInput([], DEFAULT_SETTINGS)).toThrow(/no messages to summarise/);
  });
});

describe("semanticStatusAfterSummary", () => {
  it("queues fact extraction unless semantic memory is off", () => {
    expect(semanticStatusAfterSummary(DEFAULT_SETTINGS)).toBe("pending");
    expect(
      semanticStatusAfterSummary({ ...DEFAULT_SETTINGS, semantic: { ...DEFAULT_SETTINGS.semantic, enabled: false } }),
    ).toBe("skipped");
  });
});

import { describe, expect, it } from "vitest";
import { episodeCut } from "./triggers";

const now = "2026-01-01T00:00:00.000Z";

describe("episodeCut", () => {
  it("no row: the thread was not found", () => {
    expect(episodeCut(undefined, "idle", now)).toEqual({
      found: false,
      dataset: null,
      episodeId: null,
      job: null,
      endedAt: null,
    });
  });

  it("a cut: the episode and its job, due at the returned time", () => {
    const row = { dataset: "default", found: 1, episode_id: "epi_1", job_key: "episode:epi_1", job_run_at: now };
    expect(episodeCut(row, "idle", now)).toEqual({
      found: true,
      dataset: "default",
      episodeId: "epi_1",
      job: { key: "episode:epi_1", runAt: new Date(now) },
      endedAt: null,
    });
  });

  it("an end records its time, even with nothing new to cut", () => {
    const row = {
      dataset: "default",
      found: 1,
      episode_id: null,
      job_key: null,
      job_run_at: null,
    };
    expect(episodeCut(row, "end", now)).toMatchObject({ found: true, episodeId: null, job: null, endedAt: now });
  });
});

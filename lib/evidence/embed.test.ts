import { describe, expect, it } from "vitest";
import { embedDueAt, storeChunks } from "./embed";
import { EMBED_DEBOUNCE_MS, EMBED_MAX_WAIT_MS } from "./write";

const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);

describe("embedDueAt", () => {
  it("waits for a debounce of quiet after the thread's last write", () => {
    expect(embedDueAt({ now: at(1000), lastWriteAt: at(500), armedAt: at(0) })).toEqual(at(500 + EMBED_DEBOUNCE_MS));
  });

  it("runs once the thread has been quiet long enough", () => {
    expect(embedDueAt({ now: at(EMBED_DEBOUNCE_MS), lastWriteAt: at(0), armedAt: at(0) })).toBeNull();
  });

  it("does not wait past EMBED_MAX_WAIT_MS after the job was armed, however busy the thread", () => {
    const now = at(EMBED_MAX_WAIT_MS - 100);
    expect(embedDueAt({ now, lastWriteAt: now, armedAt: at(0) })).toEqual(at(EMBED_MAX_WAIT_MS));
    expect(embedDueAt({ now: at(EMBED_MAX_WAIT_MS), lastWriteAt: at(EMBED_MAX_WAIT_MS), armedAt: at(0) })).toBeNull();
  });

  it("without an arming time (an older job) waits for quiet only; a thread never written to runs now", () => {
    expect(embedDueAt({ now: at(0), lastWriteAt: at(0), armedAt: null })).toEqual(at(EMBED_DEBOUNCE_MS));
    expect(embedDueAt({ now: at(0), lastWriteAt: null, armedAt: null })).toBeNull();
  });
});

describe("storeChunks", () => {
  it("cuts rows into parts of at most the size, in order, the last one shorter", () => {
    expect(storeChunks([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(storeChunks([1, 2, 3], 3)).toEqual([[1, 2, 3]]);
    expect(storeChunks([], 32)).toEqual([]);
  });

  it("treats a size under one as one: every row is stored", () => {
    expect(storeChunks([1, 2], 0)).toEqual([[1], [2]]);
  });
});

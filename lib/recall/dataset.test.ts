import { describe, expect, it } from "vitest";
import { THREADS_START, type ThreadMessageJson, threadsChunk } from "./dataset";

const at = "2026-01-01T00:00:00.000Z";
const msg = (thread_id: string, seq: number | null, content = `m${seq}`): ThreadMessageJson => ({
  thread_id,
  tags: ["a"],
  created_at: at,
  seq,
  role: seq === null ? null : "user",
  content: seq === null ? null : content,
  message_created_at: seq === null ? null : at,
});

/** The whole threads array as exportDataset writes it, from pages. */
function threadsJson(pages: ThreadMessageJson[][]) {
  let state = THREADS_START;
  let text = "[";
  for (const page of pages) {
    const next = threadsChunk(state, page);
    state = next.state;
    text += next.chunk;
  }
  if (state.openThread !== null) text += "]}";
  return JSON.parse(`${text}]`);
}

describe("threadsChunk", () => {
  it("writes threads with their messages, a thread's messages spanning pages, an empty thread with none", () => {
    const threads = threadsJson([[msg("t1", 1), msg("t1", 2)], [msg("t1", 3), msg("t2", null)], [msg("t3", 1)]]);
    expect(threads).toEqual([
      {
        threadId: "t1",
        tags: ["a"],
        createdAt: at,
        messages: [1, 2, 3].map((n) => ({ role: "user", content: `m${n}`, createdAt: at })),
      },
      { threadId: "t2", tags: ["a"], createdAt: at, messages: [] },
      { threadId: "t3", tags: ["a"], createdAt: at, messages: [{ role: "user", content: "m1", createdAt: at }] },
    ]);
  });

  it("no pages: an empty array", () => {
    expect(threadsJson([])).toEqual([]);
  });
});

import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { EMBED_DEBOUNCE_MS } from "../../lib/evidence/write";
import { LEASE_MS, runDueJobs, runJobByKey } from "../../lib/jobs/runner";
import { claimJobs } from "../../lib/jobs/store";
import { COMPACT_KEEP_RECENT } from "../../lib/working/compaction";
import { type CutEpisode, unexplainedOverlaps } from "../helpers/episode-overlaps";
import { useEpisodicService } from "../helpers/episodic-fixtures";
import { messageEmbedKey } from "../helpers/jobs-of-kind";

/**
 * Issue 33, one job per episode: its run takes the thread's embedding work over through that
 * work's own job lease (never outside it), and a thread's cuts never overlap but for an `end`
 * repeated without new messages.
 */
const { h, tenant } = useEpisodicService();
const MINUTE = 60_000;

/** Embedding calls (their inputs) that embedded any of `texts` as messages (not a summary joining them). */
const messageEmbeddings = (texts: string[]) =>
  h.fake
    .embeddingCalls()
    .map((c) => c.input)
    .filter((input) => input.some((text) => texts.includes(text)))
    // Messages of one moment (the manual clock) are embedded in id order: compare them as sets.
    .map((input) => [...input].sort());

async function vectorCount(threadId: string) {
  const [row] = rowsOf<{ n: number | string }>(
    await h.svc.deps.db.execute(sql`SELECT count(*) AS n FROM message_vectors WHERE thread_id = ${threadId}`),
  );
  return Number(row.n);
}

describe("the episode's embedding step, through the thread's embedding job", () => {
  it("embeds a thread's messages once when its message-embed job and its episode's job run in the same batch", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    const texts = ["batch one alpha", "batch one beta"];
    for (const text of texts) await t.say(threadId, text);
    // Both due together: the thread's embedding job (its debounce is over) and the episode's job.
    h.clock.advance(EMBED_DEBOUNCE_MS);
    const { episodeId } = await t.end(threadId);
    expect((await t.jobs()).map((j) => j.key).sort()).toEqual(
      [`episode:${episodeId}`, `idle:${threadId}`, messageEmbedKey(threadId)].sort(),
    );
    h.fake.latencyMs = 20;
    expect(await runDueJobs(h.svc.deps)).toBe(2);
    expect(messageEmbeddings(texts)).toEqual([[...texts].sort()]);
    expect(await vectorCount(threadId)).toBe(2);
    expect((await t.episode(episodeId as string)).status).toBe("completed");
    expect((await t.jobs()).map((j) => j.key)).toEqual([`idle:${threadId}`]);
  });

  it("takes the thread's embedding job over before its debounce, runs it under its lease, and completes it", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    const texts = ["early gamma", "early delta"];
    for (const text of texts) await t.say(threadId, text);
    const { episodeId } = await t.end(threadId);
    // The embedding job is not due yet; the episode's is.
    expect(await runJobByKey(h.svc.deps, messageEmbedKey(threadId))).toBe(false);
    expect(await runJobByKey(h.svc.deps, `episode:${episodeId}`)).toBe(true);
    expect(messageEmbeddings(texts)).toEqual([[...texts].sort()]);
    expect(await vectorCount(threadId)).toBe(2);
    expect((await t.jobs()).map((j) => j.key)).toEqual([`idle:${threadId}`]);
  });

  it("leaves the thread's embedding to the worker holding its job: no embedding outside that lease", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    const texts = ["held epsilon", "held zeta"];
    for (const text of texts) await t.say(threadId, text);
    const { episodeId } = await t.end(threadId);
    const [held] = await claimJobs(h.svc.deps.db, {
      now: h.clock.now(),
      leaseMs: LEASE_MS,
      limit: 1,
      key: messageEmbedKey(threadId),
      early: true,
    });
    expect(held).toBeDefined();
    expect(await runJobByKey(h.svc.deps, `episode:${episodeId}`)).toBe(true);
    expect((await t.episode(episodeId as string)).status).toBe("completed");
    expect(messageEmbeddings(texts)).toEqual([]);
    expect(await vectorCount(threadId)).toBe(0);
    // Still the other worker's, under the lease it took.
    expect((await t.jobs()).find((j) => j.key === messageEmbedKey(threadId))?.lockedUntil).toBe(
      held.lockedUntil?.toISOString(),
    );
  });
});

describe("a thread's cuts never overlap", () => {
  const idleCut = async (t: Awaited<ReturnType<typeof tenant>>, threadId: string) => {
    h.clock.advance(30 * MINUTE);
    await runDueJobs(h.svc.deps);
    const episodes = (await t.episodes()).filter((e) => e.thread_id === threadId);
    return episodes.at(-1);
  };

  it("the first end after an idle cut took the last messages cuts nothing; a repeated end takes the whole thread again", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.conversation(threadId, ["one", "two"]);
    const first = await t.end(threadId);
    expect(first.episodeId).toMatch(/^epi_/);
    h.clock.advance(MINUTE);
    await t.conversation(threadId, ["three", "four", "five"]);
    const idle = await idleCut(t, threadId);
    expect(idle).toMatchObject({ message_count: 3, metadata: { trigger: "idle" } });

    // The client's end arrives (a second) after the idle timer cut the messages it meant: nothing new.
    h.clock.advance(1_000);
    const late = await t.end(threadId);
    expect(late.episodeId).toBeNull();
    expect(await t.episodes()).toHaveLength(2);

    // Sent again with nothing new in between: a repeat, another episode of the whole thread (the
    // spec). (An end stamped in the very millisecond of the idle cut would count as before it.)
    const repeated = await t.end(threadId);
    expect(repeated.episodeId).toMatch(/^epi_/);
    expect(await t.episode(repeated.episodeId as string)).toMatchObject({
      messageCount: 5,
      metadata: { trigger: "end" },
    });
    // Once summarised it supersedes the two it covers: archived, out of recall and the list.
    await runDueJobs(h.svc.deps);
    expect((await t.episodes()).map((e) => [e.message_count, e.status])).toEqual([
      [2, "archived"],
      [3, "archived"],
      [5, "completed"],
    ]);
    const listed = await t.get("/v1/memory/episodic/datasets/ds/episodes");
    expect(((await listed.json()) as { total: number }).total).toBe(1);
  });

  it("an end after an idle cut and new messages cuts only the new ones", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.conversation(threadId, ["six", "seven"]);
    await idleCut(t, threadId);
    await t.conversation(threadId, ["eight"]);
    const { episodeId } = await t.end(threadId);
    expect(await t.episode(episodeId as string)).toMatchObject({ messageCount: 1, metadata: { trigger: "end" } });
    // And the end repeated right after it takes the whole thread again.
    const again = await t.end(threadId);
    expect(await t.episode(again.episodeId as string)).toMatchObject({ messageCount: 3 });
  });

  it("a compaction summary after the last cut is nothing new; a repeated end then takes the thread to the summary's number", async () => {
    // What CI's crash suite found (seed 181450481): a thread compacted at its 20th message while a
    // sibling cut took messages 15-20; the summary took number 21, the end after it found nothing
    // new, and the repeated end took 1-21. No episode covers a summary.
    const t = await tenant();
    const threadId = await t.thread("ds");
    const words = ["one", "two", "three", "four", "five", "six", "seven", "eight"];
    await t.conversation(threadId, words);
    const cut = await t.end(threadId);
    expect(await t.episode(cut.episodeId as string)).toMatchObject({ messageCount: 8 });
    const compacted = await t.get(`/v1/memory/working/threads/${threadId}/compact`, { method: "POST" });
    expect(compacted.status).toBe(200);
    expect(await compacted.json()).toMatchObject({ compactedCount: 8 - COMPACT_KEEP_RECENT });

    h.clock.advance(1_000);
    const summaryOnly = await t.end(threadId);
    expect(summaryOnly.episodeId).toBeNull();
    const repeated = await t.end(threadId);
    expect(await t.episode(repeated.episodeId as string)).toMatchObject({ messageCount: 8 });
    const rows = rowsOf<{ id: string; status: string; from_seq: number; to_seq: number; trigger: string }>(
      await h.svc.deps.db.execute(sql`SELECT id, status, from_seq, to_seq, metadata ->> 'trigger' AS trigger
          FROM episodes WHERE thread_id = ${threadId} ORDER BY created_at, from_seq`),
    );
    const ranges: CutEpisode[] = rows.map((e, i) => ({
      id: e.id,
      threadId,
      status: e.status,
      fromSeq: e.from_seq,
      toSeq: e.to_seq,
      trigger: e.trigger,
      createdAt: i, // in the order they were cut
    }));
    expect(ranges.map((e) => [e.fromSeq, e.toSeq, e.trigger])).toEqual([
      [1, 8, "end"],
      [1, 9, "end"],
    ]);
    // The crash suites' rule explains it by the client's one repeated end, and only by it.
    expect(unexplainedOverlaps(ranges, new Map([[threadId, 1]]))).toEqual([]);
    expect(unexplainedOverlaps(ranges, new Map())).toHaveLength(1);
  });

  it("counts a failed episode as a cut like any other; with every episode archived an end takes the thread whole again", async () => {
    const t = await tenant();
    const threadId = await t.thread("ds");
    await t.conversation(threadId, ["nine", "ten"]);
    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const failed = await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect((await t.episode(failed.episodeId as string)).status).toBe("failed");
    // A repeated end after a failed episode is still a repeat (the thread's latest cut was an end).
    const repeat = await t.end(threadId);
    expect(await t.episode(repeat.episodeId as string)).toMatchObject({ messageCount: 2 });
    // Both archived: no live episode covers the thread, so an end takes it whole once more.
    for (const id of [failed.episodeId, repeat.episodeId]) {
      expect((await t.get(`/v1/memory/episodic/episodes/${id}`, { method: "DELETE" })).status).toBe(200);
    }
    const afterArchive = await t.end(threadId);
    expect(await t.episode(afterArchive.episodeId as string)).toMatchObject({ messageCount: 2 });
  });
});

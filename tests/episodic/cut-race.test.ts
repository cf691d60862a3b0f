import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { cutEpisodeSql, type EpisodeTrigger } from "../../lib/episodic/triggers";
import { newId } from "../../lib/ids";
import { useServerConnections } from "../helpers/server-connections";
import { testPgUrl } from "../helpers/test-database";

/**
 * Two cuts of one thread at once, in two transactions (a server: PGlite has one connection). The
 * second waits for the thread's row lock; its snapshot predates the first cut's episode. It must
 * still see that cut as the thread's latest: the first end after a timer's cut takes nothing, and
 * only an end behind an end takes the whole thread again. (Found by the crash suite on a server:
 * an end that waited behind an idle cut took the whole thread again over the episodes already cut.)
 */
describe.runIf(testPgUrl())("two cuts of one thread at once (PostgreSQL server)", () => {
  const { clients, run, waitsForLock } = useServerConnections(3);
  let first: pg.Client;
  let second: pg.Client;
  let observer: pg.Client;
  let clock = Date.parse("2026-11-28T00:00:00Z");

  beforeAll(() => {
    [first, second, observer] = clients;
  });

  const tick = () => {
    clock += 1_000;
    return new Date(clock).toISOString();
  };
  const cut = (client: pg.Client, thread: Thread, trigger: EpisodeTrigger) =>
    run(client, cutEpisodeSql({ ...thread, trigger, episodeId: newId("epi"), now: tick() }));

  interface Thread {
    projectId: string;
    threadId: string;
  }

  async function newThread(): Promise<Thread> {
    const projectId = `prj_${randomUUID().slice(0, 8)}`;
    const threadId = `thr_${randomUUID().slice(0, 8)}`;
    await run(observer, sql`INSERT INTO projects (id, name) VALUES (${projectId}, 'cuts')`);
    await run(observer, sql`INSERT INTO threads (id, project_id, dataset) VALUES (${threadId}, ${projectId}, 'ds')`);
    return { projectId, threadId };
  }

  async function say(thread: Thread, n: number, client = observer) {
    for (let i = 0; i < n; i++) {
      await run(
        client,
        sql`WITH t AS (UPDATE threads SET last_seq = last_seq + 1, last_message_at = ${tick()}::timestamptz
            WHERE id = ${thread.threadId} RETURNING last_seq, last_message_at)
          INSERT INTO messages (id, project_id, thread_id, seq, role, content, created_at)
          SELECT ${newId("msg")}, ${thread.projectId}, ${thread.threadId}, t.last_seq, 'user', 'words', t.last_message_at FROM t`,
      );
    }
  }

  const ranges = async (thread: Thread) =>
    (
      await run(
        observer,
        sql`SELECT from_seq || '-' || to_seq || ' ' || (metadata ->> 'trigger') AS cut FROM episodes
          WHERE thread_id = ${thread.threadId} ORDER BY created_at`,
      )
    ).rows.map((r) => r.cut as string);

  /** `earlier` cuts in an open transaction; `later` starts meanwhile, waits, and runs once it commits. */
  async function race(thread: Thread, earlier: EpisodeTrigger, later: EpisodeTrigger) {
    const waiting = await waitsForLock(second);
    await first.query("BEGIN");
    await cut(first, thread, earlier);
    const behind = cut(second, thread, later);
    await waiting();
    await first.query("COMMIT");
    await behind;
  }

  it("an end behind an idle cut of the last messages takes nothing, after an end before them", async () => {
    const thread = await newThread();
    await say(thread, 3);
    await cut(observer, thread, "end");
    await say(thread, 2);
    await race(thread, "idle", "end");
    expect(await ranges(thread)).toEqual(["1-3 end", "4-5 idle"]);
  });

  it("an end behind a sibling cut of a thread's first messages takes nothing", async () => {
    const thread = await newThread();
    await say(thread, 3);
    await race(thread, "sibling", "end");
    expect(await ranges(thread)).toEqual(["1-3 sibling"]);
    // The client's next end is its second in a row: another episode, of the whole thread.
    await cut(observer, thread, "end");
    expect(await ranges(thread)).toEqual(["1-3 sibling", "1-3 end"]);
  });

  it("an end behind an end is a repeat: the whole thread again; a timer behind an end takes nothing", async () => {
    const thread = await newThread();
    await say(thread, 2);
    await race(thread, "end", "end");
    expect(await ranges(thread)).toEqual(["1-2 end", "1-2 end"]);
    await say(thread, 1);
    await race(thread, "end", "idle");
    expect(await ranges(thread)).toEqual(["1-2 end", "1-2 end", "3-3 end"]);
  });

  it("a cut behind a message's insert ends at the messages it can see: the new one waits for the next cut", async () => {
    // The insert's transaction holds the thread's row; the end waits for it, then reads the row's
    // new last_seq, but its snapshot predates the message. It covered the message all the same,
    // and with nothing new to see, cut no episode yet covered them all: no episode ever held them.
    const thread = await newThread();
    await say(thread, 1);
    await cut(observer, thread, "end");
    const waiting = await waitsForLock(second);
    await first.query("BEGIN");
    await say(thread, 2, first);
    const behind = cut(second, thread, "end");
    await waiting();
    await first.query("COMMIT");
    const ended = await behind;
    // An end behind an end with nothing new: the whole thread it can see again (the repeat rule).
    expect(await ranges(thread)).toEqual(["1-1 end", "1-1 end"]);
    expect(ended.rows[0].episode_id).not.toBeNull();
    const [row] = (await run(observer, sql`SELECT episode_seq, last_seq FROM threads WHERE id = ${thread.threadId}`))
      .rows;
    expect([row.episode_seq, row.last_seq]).toEqual([1, 3]);
    // The messages it could not see are the next cut's.
    await cut(observer, thread, "idle");
    expect(await ranges(thread)).toEqual(["1-1 end", "1-1 end", "2-3 idle"]);
  });

  it("a first cut behind a message's insert takes the messages before it, and leaves the new one", async () => {
    const thread = await newThread();
    await say(thread, 2);
    const waiting = await waitsForLock(second);
    await first.query("BEGIN");
    await say(thread, 1, first);
    const behind = cut(second, thread, "idle");
    await waiting();
    await first.query("COMMIT");
    await behind;
    const [episode] = (
      await run(
        observer,
        sql`SELECT from_seq, to_seq, message_count FROM episodes WHERE thread_id = ${thread.threadId}`,
      )
    ).rows;
    expect([episode.from_seq, episode.to_seq, episode.message_count]).toEqual([1, 2, 2]);
    await cut(observer, thread, "idle");
    expect(await ranges(thread)).toEqual(["1-2 idle", "3-3 idle"]);
  });
});

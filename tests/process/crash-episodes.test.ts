import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPgliteDatabase } from "../../lib/db/pglite";
import { rowsOf, toDate } from "../../lib/db/rows";
import { LEASE_MS } from "../../lib/jobs/store";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type CutEpisode, unexplainedOverlaps } from "../helpers/episode-overlaps";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { callJson, provisionApiKey } from "../helpers/http-tenant";
import { type ServerProcess, startServerProcess } from "../helpers/process";
import { serverProcessDatabase, testPgUrl } from "../helpers/test-database";

/**
 * The crash suite of a thread's episodes (issue 33): threads with a 1 s idle timer are written to
 * by concurrent clients that end them, end them twice in a row, or leave them idle, while the
 * Node.js host is killed with SIGKILL and restarted on the same database; each client carries on
 * with its thread after a restart (its next step is often an end, racing the idle timers that came
 * due while the process was down). Then no two live episodes of a thread share a message unless a
 * repeated end without new messages explains it, and every episode is terminal.
 *
 * CRASH_RUNS (default 1) runs the scenario that many times, each on a database of its own with its
 * own seed (printed); CRASH_SEED replays one. With TEST_PG_URL each run's host uses a database of
 * its own on that server (leases then run out instead of being released at start).
 */
const RUNS = Math.max(1, Number(process.env.CRASH_RUNS) || 1);
const FIRST_SEED = Number(process.env.CRASH_SEED) || Math.floor(Math.random() * 2 ** 31);
const KILLS = 3;
const WRITERS = 6;
const IDLE_MS = 1_000;
const ON_SERVER = Boolean(testPgUrl());
const SWEEP_MS = 2_000;
const SETTLE_BUDGET_MS = ON_SERVER ? 30_000 + LEASE_MS + SWEEP_MS : 30_000;
const ADMIN_PASSWORD = "crash-episodes-password";

function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let provider: FakeOpenAI;
beforeAll(async () => {
  provider = await startFakeOpenAI();
  provider.endpointLatencyMs = { chat: 150, embeddings: 30 };
  provider.onStructured("episode_summary", () => ({ summary: "what was said", keyLearnings: [] }));
  provider.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
});
afterAll(async () => {
  await provider?.close();
});

/** One client's thread and what the client sent it: a repeated end is two ends with no message between. */
interface ThreadLog {
  id: string;
  lastWasEnd: boolean;
  repeatedEnds: number;
}

/** Every episode of the dataset, read from the database once the host is stopped. */
async function readEpisodes(env: Record<string, string>): Promise<CutEpisode[]> {
  const query = sql`SELECT id, thread_id, status, from_seq, to_seq, metadata ->> 'trigger' AS trigger, created_at
    FROM episodes WHERE dataset = 'crash-episodes'`;
  let rows: Record<string, unknown>[];
  if (env.DATABASE_URL) {
    const client = new pg.Client({ connectionString: env.DATABASE_URL });
    await client.connect();
    try {
      const text = `SELECT id, thread_id, status, from_seq, to_seq, metadata ->> 'trigger' AS trigger, created_at
        FROM episodes WHERE dataset = 'crash-episodes'`;
      rows = (await client.query(text)).rows;
    } finally {
      await client.end();
    }
  } else {
    const database = await createPgliteDatabase({ dir: env.PGLITE_DIR });
    try {
      rows = rowsOf<Record<string, unknown>>(await database.db.execute(query));
    } finally {
      await database.close();
    }
  }
  return rows.map((r) => ({
    id: String(r.id),
    threadId: String(r.thread_id),
    status: String(r.status),
    fromSeq: Number(r.from_seq),
    toSeq: Number(r.to_seq),
    trigger: r.trigger === null ? null : String(r.trigger),
    createdAt: (toDate(r.created_at) as Date).getTime(),
  }));
}

async function crashRun(seed: number) {
  const random = mulberry32(seed);
  const dir = mkdtempSync(join(tmpdir(), "memsvc-crash-episodes-"));
  const database = await serverProcessDatabase(join(dir, "pglite"));
  const context = `seed ${seed} (replay with CRASH_SEED=${seed})`;
  const env = {
    ...database.env,
    ...(ON_SERVER ? { RETRY_INTERVAL_MS: String(SWEEP_MS) } : {}),
    ADMIN_PASSWORD,
    OPENAI_BASE_URL: provider.url,
    OPENAI_API_KEY: "test-key",
    EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
  };
  const cleanUp = async () => {
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  };
  let server: ServerProcess;
  try {
    server = await startServerProcess(env, 120_000);
  } catch (err) {
    await cleanUp();
    throw err;
  }
  try {
    const call = (path: string, body?: unknown) =>
      callJson(server.url, path, { token: key, ...(body === undefined ? {} : { body }) });
    const key = await provisionApiKey(server.url, ADMIN_PASSWORD, "crash-episodes");
    const threads: ThreadLog[] = [];
    const newThread = async (): Promise<ThreadLog> => {
      const res = await call("/v1/threads", {
        dataset: "crash-episodes",
        settings: { episodic: { autoEpisodeIntervalMs: IDLE_MS } },
      });
      if (res.status !== 201) throw new Error(`thread create answered ${res.status}`);
      const thread = { id: res.body.threadId as string, lastWasEnd: false, repeatedEnds: 0 };
      threads.push(thread);
      return thread;
    };
    // An end cut off by a kill may have been committed: counted as sent (it can only widen what is explained).
    const end = async (thread: ThreadLog) => {
      if (thread.lastWasEnd) thread.repeatedEnds++;
      thread.lastWasEnd = true;
      const res = await call(`/v1/threads/${thread.id}/end`, {});
      if (res.status >= 500) throw new Error(`end answered ${res.status}`);
    };
    const say = async (thread: ThreadLog) => {
      const res = await call(`/v1/memory/working/threads/${thread.id}/messages`, {
        role: random() < 0.6 ? "user" : "assistant",
        content: `message ${random()}`,
      });
      if (res.status >= 500) throw new Error(`add message answered ${res.status}`);
      // Only an acknowledged message is surely between two ends (one cut off by a kill may be lost).
      thread.lastWasEnd = false;
    };
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

    /** One client: a few messages, then an end, two ends, or a pause past the idle timer; now and then a new thread. */
    const writerThreads: (ThreadLog | undefined)[] = Array.from({ length: WRITERS }, () => undefined);
    let dead = false;
    const writer = async (i: number, untilMs: number) => {
      try {
        let thread = writerThreads[i] ?? (await newThread());
        writerThreads[i] = thread;
        // Back from a restart: half the time the client's next step is the end it meant to send.
        if (thread.lastWasEnd === false && random() < 0.5) await end(thread);
        while (!dead && Date.now() < untilMs) {
          const n = 1 + Math.floor(random() * 4);
          for (let m = 0; m < n && !dead; m++) await say(thread);
          const draw = random();
          if (draw < 0.4) await end(thread);
          else if (draw < 0.55) {
            await end(thread);
            await end(thread);
          } else await pause(IDLE_MS * (0.8 + random() * 0.8));
          if (random() < 0.15) {
            thread = await newThread();
            writerThreads[i] = thread;
          }
        }
      } catch (err) {
        if (!dead) throw err; // refused or reset: the process is gone
      }
    };

    for (let round = 0; round <= KILLS; round++) {
      dead = false;
      const last = round === KILLS;
      // The last round runs to its end without a kill, then the host is stopped for the check.
      const until = Date.now() + (last ? 3_000 : 1_500 + random() * 2_500);
      const writers = Array.from({ length: WRITERS }, (_, i) => writer(i, last ? until : Number.POSITIVE_INFINITY));
      if (last) {
        await Promise.all(writers);
        break;
      }
      while (Date.now() < until) await pause(20);
      server.child.kill("SIGKILL");
      dead = true;
      await server.exited;
      await Promise.all(writers);
      // Down for a moment: idle timers come due meanwhile and fire at the restart.
      await pause(IDLE_MS * (0.5 + random()));
      server = await startServerProcess(env, 120_000);
    }

    // The last idle timers fire, then every episode is terminal within the budget.
    await pause(2 * IDLE_MS);
    const settledBy = Date.now() + SETTLE_BUDGET_MS;
    let open = Number.POSITIVE_INFINITY;
    while (open > 0 && Date.now() < settledBy) {
      open = 0;
      for (const status of ["pending", "processing"]) {
        const page = await call(`/v1/memory/episodic/datasets/crash-episodes/episodes?status=${status}&limit=1`);
        open += page.body.total as number;
      }
      if (open > 0) await pause(250);
    }
    expect(open, `${context}: episodes still pending or processing`).toBe(0);
    server.child.kill("SIGTERM");
    await server.exited;

    const episodes = await readEpisodes(env);
    const repeated = new Map(threads.map((t) => [t.id, t.repeatedEnds]));
    const overlaps = unexplainedOverlaps(episodes, repeated);
    // Overlapping pairs before the repeated ends the clients sent explain any.
    const overlapping = unexplainedOverlaps(episodes, new Map()).length;
    console.info(
      `crash-episodes (${context}): ${threads.length} threads, ${episodes.length} episodes ` +
        `(${episodes.filter((e) => e.trigger === "idle").length} idle cuts), ` +
        `${[...repeated.values()].reduce((a, b) => a + b, 0)} repeated ends, ${overlapping} overlapping pairs, ` +
        `${overlaps.length} unexplained overlaps`,
    );
    expect(episodes.length, context).toBeGreaterThan(0);
    expect(
      overlaps.map(
        (o) =>
          `${o.threadId}: ${o.earlier.fromSeq}-${o.earlier.toSeq} (${o.earlier.trigger}) and ${o.later.fromSeq}-${o.later.toSeq} (${o.later.trigger})`,
      ),
      `${context}: episodes of one thread sharing messages`,
    ).toEqual([]);
  } finally {
    if (server.child.exitCode === null) {
      server.child.kill("SIGTERM");
      await server.exited;
    }
    await cleanUp();
  }
}

describe("the overlap check", () => {
  const ep = (
    id: string,
    fromSeq: number,
    toSeq: number,
    trigger: string,
    createdAt: number,
    status = "completed",
  ) => ({
    id,
    threadId: "thr",
    status,
    fromSeq,
    toSeq,
    trigger,
    createdAt,
  });

  it("finds an end that cut again what an idle cut and earlier ends took (the shape seen after a restart)", () => {
    const cut = [
      ep("a", 1, 29, "end", 1),
      ep("b", 30, 30, "end", 2),
      ep("c", 31, 36, "idle", 3),
      ep("d", 1, 36, "end", 4),
    ];
    expect(unexplainedOverlaps(cut, new Map()).map((o) => [o.earlier.id, o.later.id])).toEqual([
      ["a", "d"],
      ["b", "d"],
      ["c", "d"],
    ]);
    // A repeated end the client sent explains one whole-thread cut, not two; an archived episode overlaps nothing.
    expect(unexplainedOverlaps(cut, new Map([["thr", 1]]))).toEqual([]);
    const twice = [...cut, ep("e", 1, 36, "end", 5)];
    expect(unexplainedOverlaps(twice, new Map([["thr", 1]])).map((o) => o.later.id)).toEqual(["e", "e", "e", "e"]);
    expect(unexplainedOverlaps([ep("x", 1, 5, "idle", 1, "archived"), ep("y", 1, 5, "end", 2)], new Map())).toEqual([]);
  });
});

describe(`crash suite of episodes (${RUNS} run(s) from seed ${FIRST_SEED})`, () => {
  for (let run = 0; run < RUNS; run++) {
    const seed = (FIRST_SEED + run * 7919) % 2 ** 31;
    it(`run ${run + 1}: no two live episodes of a thread share a message across kill -9 and restarts (seed ${seed})`, {
      timeout: ON_SERVER ? 300_000 : 240_000,
    }, async () => {
      await crashRun(seed);
    });
  }
});

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LEASE_MS } from "../../lib/jobs/store";
import { TEST_EMBEDDING_DIMENSIONS } from "../helpers/constants";
import { type FakeOpenAI, startFakeOpenAI } from "../helpers/fake-openai";
import { callJson, provisionApiKey } from "../helpers/http-tenant";
import { type ServerProcess, startServerProcess } from "../helpers/process";
import { serverProcessDatabase, testPgUrl } from "../helpers/test-database";

/**
 * The crash suite: the Node.js host on an on-disk embedded database, written to by several
 * concurrent clients while threads end and their episodes are summarised by a slow provider, is
 * killed with SIGKILL at random moments and restarted on the same directory. Every acknowledged
 * message must be there exactly once with gapless sequence numbers, and every episode must reach a
 * terminal state within 30 s of the last restart (leases of the killed process are released at
 * start, not a lease later). The moments are drawn from a seed, printed on failure; set
 * CRASH_SEED to replay one.
 *
 * With TEST_PG_URL the host runs on a database of its own on that PostgreSQL server
 * (DATABASE_URL, migrated from empty at the first start) and is killed and restarted the same way.
 * There the host cannot know it is the database's only one, so a killed process's leases are not
 * released at start: they run out (LEASE_MS) and the sweep (RETRY_INTERVAL_MS, short here) takes
 * the work over, so the budget is a lease longer.
 */
const SEED = Number(process.env.CRASH_SEED) || Math.floor(Math.random() * 2 ** 31);
const KILLS = 3;
const WRITERS = 6;
const MIN_ACKS_PER_ROUND = 10;
const ON_SERVER = Boolean(testPgUrl());
const SWEEP_MS = 5_000;
const SETTLE_BUDGET_MS = ON_SERVER ? 30_000 + LEASE_MS + SWEEP_MS : 30_000;

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

const dir = mkdtempSync(join(tmpdir(), "memsvc-crash-"));
let provider: FakeOpenAI;
let database: Awaited<ReturnType<typeof serverProcessDatabase>>;
beforeAll(async () => {
  database = await serverProcessDatabase(join(dir, "pglite"));
  provider = await startFakeOpenAI();
  // Slow enough that episodes are mid-summary when the process dies.
  provider.endpointLatencyMs = { chat: 250, embeddings: 50 };
  provider.onStructured("episode_summary", () => ({ summary: "what was said", keyLearnings: [] }));
  provider.onStructured("fact_extraction", () => ({ facts: [], entities: [] }));
});
afterAll(async () => {
  await provider?.close();
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const ADMIN_PASSWORD = "crash-suite-password";

describe(`crash suite (seed ${SEED})`, { timeout: ON_SERVER ? 240_000 : 180_000 }, () => {
  it("keeps every acknowledged message once and finishes every episode after repeated kill -9", async () => {
    const random = mulberry32(SEED);
    const env = {
      ...database.env,
      ...(ON_SERVER ? { RETRY_INTERVAL_MS: String(SWEEP_MS) } : {}),
      ADMIN_PASSWORD,
      OPENAI_BASE_URL: provider.url,
      OPENAI_API_KEY: "test-key",
      EMBEDDING_DIMENSIONS: String(TEST_EMBEDDING_DIMENSIONS),
    };
    const context = `seed ${SEED} (replay with CRASH_SEED=${SEED})`;
    let server: ServerProcess = await startServerProcess(env);
    const call = (path: string, init: { method?: string; token?: string; body?: unknown } = {}) =>
      callJson(server.url, path, init);
    const key = await provisionApiKey(server.url, ADMIN_PASSWORD, "crash");

    const acknowledged = new Map<string, { threadId: string; seq: number }>();
    const threads = new Set<string>();
    let ended = 0;
    const newThread = async () => {
      const res = await call("/v1/threads", { token: key, body: { dataset: "crash" } });
      if (res.status !== 201) throw new Error(`thread create answered ${res.status}`);
      threads.add(res.body.threadId as string);
      return res.body.threadId as string;
    };

    for (let round = 0; round < KILLS; round++) {
      let dead = false;
      const writer = async () => {
        let threadId = await newThread().catch(() => undefined);
        // Each thread ends after a few messages: there are episodes in flight at every kill.
        let [written, endAfter] = [0, 3 + Math.floor(random() * 6)];
        while (!dead && threadId) {
          try {
            if (written >= endAfter) {
              // End the thread: its messages become an episode, summarised in the background.
              const end = await call(`/v1/threads/${threadId}/end`, { token: key, body: {} });
              if (end.status < 300) ended++;
              threadId = await newThread();
              [written, endAfter] = [0, 3 + Math.floor(random() * 6)];
              continue;
            }
            written++;
            const res = await call(`/v1/memory/working/threads/${threadId}/messages`, {
              token: key,
              body: { role: random() < 0.5 ? "user" : "assistant", content: `round ${round} ${random()}` },
            });
            if (res.status === 201) {
              acknowledged.set(res.body.messageId as string, { threadId, seq: res.body.sequenceNumber as number });
            } else if (res.status >= 500) {
              throw new Error(`add message answered ${res.status}: ${JSON.stringify(res.body)}`);
            }
          } catch (err) {
            if (dead) return; // refused or reset: the process is gone
            throw err;
          }
        }
      };
      const writers = Array.from({ length: WRITERS }, writer);
      // A random moment, but not before this round has written something (a loaded machine is slow).
      const [ackedBefore, endedBefore] = [acknowledged.size, ended];
      const killAt = Date.now() + 400 + random() * 1600;
      const waited = () => acknowledged.size - ackedBefore >= MIN_ACKS_PER_ROUND && ended > endedBefore;
      while (Date.now() < killAt || (!waited() && Date.now() < killAt + 30_000)) {
        await new Promise((r) => setTimeout(r, 20));
      }
      server.child.kill("SIGKILL");
      dead = true;
      await server.exited;
      await Promise.all(writers);
      server = await startServerProcess(env);
    }
    const restartedAt = Date.now();

    try {
      expect(acknowledged.size, context).toBeGreaterThanOrEqual(KILLS * MIN_ACKS_PER_ROUND);
      expect(ended, context).toBeGreaterThan(0);

      // Every episode reaches a terminal state within the budget of the last restart.
      let open = Number.POSITIVE_INFINITY;
      while (open > 0 && Date.now() - restartedAt < SETTLE_BUDGET_MS) {
        open = 0;
        for (const status of ["pending", "processing"]) {
          const page = await call(`/v1/memory/episodic/datasets/crash/episodes?status=${status}&limit=1`, {
            token: key,
          });
          open += page.body.total as number;
        }
        if (open > 0) await new Promise((r) => setTimeout(r, 250));
      }
      expect(
        open,
        `${context}: episodes still pending or processing ${SETTLE_BUDGET_MS / 1000} s after the last restart`,
      ).toBe(0);
      console.info(
        `crash suite (${context}): ${acknowledged.size} acknowledged messages, ${ended} threads ended; every episode terminal ${Date.now() - restartedAt} ms after the last restart`,
      );
      const completed = await call("/v1/memory/episodic/datasets/crash/episodes?status=completed&limit=1", {
        token: key,
      });
      expect(completed.body.total as number, context).toBeGreaterThan(0);

      // Every acknowledged message is stored once, under its sequence number, with no gaps.
      const stored = new Map<string, { threadId: string; seq: number }>();
      for (const threadId of threads) {
        const seqs: number[] = [];
        let before: number | undefined;
        for (;;) {
          const page = await call(
            `/v1/memory/working/threads/${threadId}/messages?limit=100${before ? `&before=${before}` : ""}`,
            { token: key },
          );
          expect(page.status, context).toBe(200);
          const messages = page.body.messages as { messageId: string; sequenceNumber: number; isSummary?: boolean }[];
          for (const m of messages) {
            expect(stored.has(m.messageId), `${context}: ${m.messageId} listed twice`).toBe(false);
            stored.set(m.messageId, { threadId, seq: m.sequenceNumber });
            seqs.push(m.sequenceNumber);
          }
          if (!page.body.hasMore) break;
          before = Math.min(...messages.map((m) => m.sequenceNumber));
        }
        seqs.sort((a, b) => a - b);
        expect(seqs, `${context}: sequence numbers of ${threadId}`).toEqual(seqs.map((_, i) => i + 1));
      }
      for (const [id, at] of acknowledged) expect(stored.get(id), `${context}: acknowledged ${id}`).toEqual(at);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });
});

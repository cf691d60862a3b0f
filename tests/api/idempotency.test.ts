import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { CLAIM_LEASE_MS, type Claim, claimKey, renewClaim, requestFingerprint } from "../../lib/idempotency";
import { sweep } from "../../lib/jobs/runner";
import { startFakeOpenAI } from "../helpers/fake-openai";
import { documentedRoutes } from "../helpers/openapi";
import { createTestService, newTenant, type TestService } from "../helpers/service";

/**
 * The `Idempotency-Key` header on /v1 writes, through the app on the embedded database: replays,
 * 409 while running, 422 for another request, 400 for a bad key, expiry on a manual clock and the
 * sweep, 5xx releasing the key, streamed answers, and the statements each case costs.
 */
const fake = await startFakeOpenAI();
const statements: string[] = [];
let recording = false;
const svc = await createTestService({
  provider: fake,
  manualTime: true,
  onQuery: (text) => {
    if (recording) statements.push(text);
  },
});
afterAll(async () => {
  await svc.close();
  await fake.close();
});
const clock = svc.clock as NonNullable<TestService["clock"]>;
const TTL = svc.deps.config.idempotencyTtlMs;
const W = "/v1/memory/working/threads";

type Init = Parameters<TestService["request"]>[1] & { key?: string };

async function send(path: string, init: Init = {}) {
  const headers = new Headers(init.headers);
  if (init.key !== undefined) headers.set("Idempotency-Key", init.key);
  const res = await svc.request(path, { method: "POST", ...init, headers });
  const text = await res.text();
  return {
    status: res.status,
    text,
    body: text && res.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : undefined,
    replayed: res.headers.get("idempotent-replayed"),
    contentType: res.headers.get("content-type"),
    retryAfter: res.headers.get("retry-after"),
  };
}

/** The response with the statements sent while serving it. */
async function measured(path: string, init: Init = {}) {
  statements.length = 0;
  recording = true;
  try {
    return { ...(await send(path, init)), statements: [...statements] };
  } finally {
    recording = false;
  }
}

async function count(table: string, projectId: string): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await svc.deps.db.execute(
      sql`SELECT count(*)::int AS n FROM ${sql.identifier(table)} WHERE project_id = ${projectId}`,
    ),
  );
  return Number(row.n);
}

const keyRows = (projectId: string) => count("idempotency_keys", projectId);
const messageCount = async (threadId: string) =>
  Number(
    rowsOf<{ n: number }>(
      await svc.deps.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE thread_id = ${threadId}`),
    )[0].n,
  );

/** What a keyed chat's message statement records on its claim (the chat's own test checks it does). */
const markWrote = (claim: Claim) =>
  svc.deps.db.execute(
    sql`UPDATE idempotency_keys SET wrote_at = now() WHERE project_id = ${claim.projectId} AND key = ${claim.key}`,
  );

async function newThread(token: string) {
  const res = await send("/v1/threads", { token, json: { dataset: "idem" } });
  expect(res.status).toBe(201);
  return res.body.threadId as string;
}

describe("Idempotency-Key on /v1 writes", () => {
  it("without the header, nothing changes: every call writes and no key is stored", async () => {
    const t = await newTenant(svc);
    await send("/v1/threads", { token: t.key, json: { dataset: "a" } });
    await send("/v1/threads", { token: t.key, json: { dataset: "a" } });
    expect(await count("threads", t.projectId)).toBe(2);
    expect(await keyRows(t.projectId)).toBe(0);
  });

  it("replays the first answer (status, body, Idempotent-Replayed) and writes nothing; statements: +2, replay 2", async () => {
    const t = await newTenant(svc);
    const first = await measured("/v1/threads", { token: t.key, key: "create-1", json: { dataset: "a", tags: ["x"] } });
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();
    // Authentication, the claim, the work, the stored answer.
    expect(first.statements).toHaveLength(4);
    expect(first.statements[1]).toMatch(/insert into "idempotency_keys"/i);
    expect(first.statements[3]).toMatch(/^\s*update "idempotency_keys"/i);

    for (let i = 0; i < 3; i++) {
      const again = await measured("/v1/threads", {
        token: t.key,
        key: "create-1",
        json: { dataset: "a", tags: ["x"] },
      });
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.replayed).toBe("true");
      expect(again.contentType).toMatch(/^application\/json/);
      expect(again.statements).toHaveLength(2); // authentication, the claim (which finds the answer)
    }
    expect(await count("threads", t.projectId)).toBe(1);
  });

  it("a different request with the same key is 422; another key runs; keys are per project", async () => {
    const t = await newTenant(svc);
    const other = await newTenant(svc, "other");
    const threadId = await newThread(t.key);
    const path = `${W}/${threadId}/messages`;
    expect((await send(path, { token: t.key, key: "k", json: { role: "user", content: "one" } })).status).toBe(201);

    const body = await send(path, { token: t.key, key: "k", json: { role: "user", content: "two" } });
    expect(body.status).toBe(422);
    expect(body.body).toEqual({ error: expect.stringMatching(/Idempotency-Key.*different request/) });
    const otherPath = await send("/v1/threads", { token: t.key, key: "k", json: { role: "user", content: "one" } });
    expect(otherPath.status).toBe(422);
    const patch = await send(`/v1/threads/${threadId}`, { method: "PATCH", token: t.key, key: "k", json: {} });
    expect(patch.status).toBe(422);
    expect(await messageCount(threadId)).toBe(1);

    // The same key in another project is another key.
    const theirs = await send("/v1/threads", { token: other.key, key: "k", json: { dataset: "a" } });
    expect(theirs.status).toBe(201);
    expect(theirs.replayed).toBeNull();
  });

  it("concurrent duplicates: exactly one write, the others 409 or a replay of the one answer", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const results = await Promise.all(
      Array.from({ length: 24 }, () =>
        send(`${W}/${threadId}/messages`, { token: t.key, key: "burst", json: { role: "user", content: "once" } }),
      ),
    );
    expect(await messageCount(threadId)).toBe(1);
    const ran = results.filter((r) => r.status === 201 && r.replayed === null);
    expect(ran).toHaveLength(1);
    for (const r of results) {
      if (r.status === 409) expect(r.body).toEqual({ error: expect.stringMatching(/still being processed/) });
      else expect({ status: r.status, text: r.text }).toEqual({ status: 201, text: ran[0].text });
    }
    expect(results.some((r) => r.status === 409)).toBe(true);
    // Once the first has answered, every repeat is its replay.
    const after = await send(`${W}/${threadId}/messages`, {
      token: t.key,
      key: "burst",
      json: { role: "user", content: "once" },
    });
    expect([after.status, after.replayed, after.text]).toEqual([201, "true", ran[0].text]);
  });

  it("a request refused for its input spends no key: the corrected request runs under it", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const path = `${W}/${threadId}/messages`;
    const bad = await send(path, { token: t.key, key: "v", json: { role: "bot", content: "" } });
    expect([bad.status, bad.body.error, bad.replayed]).toEqual([400, "Validation error", null]);
    const good = await send(path, { token: t.key, key: "v", json: { role: "user", content: "fixed" } });
    expect([good.status, good.replayed]).toEqual([201, null]);

    // A wrong content type, then the same bytes as JSON: the body is the same, so a stored 415
    // would have been replayed for the whole TTL.
    const body = JSON.stringify({ role: "user", content: "typed" });
    const typeless = await send(path, { token: t.key, key: "c", body, headers: { "content-type": "text/plain" } });
    expect(typeless.status).toBe(415);
    const typed = await send(path, { token: t.key, key: "c", body, headers: { "content-type": "application/json" } });
    expect([typed.status, typed.replayed]).toEqual([201, null]);
    const malformed = await send(path, {
      token: t.key,
      key: "j",
      body: "{",
      headers: { "content-type": "application/json" },
    });
    expect([malformed.status, malformed.body.error]).toEqual([400, "Malformed JSON in request body"]);
    expect(await count("messages", t.projectId)).toBe(2);
    const typedAgain = await send(path, {
      token: t.key,
      key: "c",
      body,
      headers: { "content-type": "application/json" },
    });
    expect([typedAgain.status, typedAgain.replayed, typedAgain.text]).toEqual([201, "true", typed.text]);
    expect(await count("messages", t.projectId)).toBe(2);

    // A body over the limit, read to its end (no Content-Length) or refused from the header.
    const oversized = JSON.stringify({ role: "user", content: "x".repeat(1024 * 1024) });
    const json = { "content-type": "application/json" };
    for (const headers of [json, { ...json, "content-length": String(oversized.length) }]) {
      const big = await send(path, { token: t.key, key: "big", body: oversized, headers });
      expect([big.status, big.body.error]).toEqual([413, "Request body too large (limit 1 MB)"]);
    }
    const small = await send(path, { token: t.key, key: "big", json: { role: "user", content: "shorter" } });
    expect([small.status, small.replayed]).toEqual([201, null]);
    expect(await count("messages", t.projectId)).toBe(3);
  });

  it("a body whose names carry a lone surrogate or a NUL gets the route's own answer, not a 500 from the claim", async () => {
    const t = await newTenant(svc);
    // Raw bodies: JSON.stringify would escape the same way, but these are what a client sends.
    const json = { "content-type": "application/json" };
    const lone = await send("/v1/threads", {
      token: t.key,
      key: "s",
      body: '{"dataset":"idem\\ud800x"}',
      headers: json,
    });
    expect([lone.status, lone.body.dataset]).toEqual([201, "idem\ufffdx"]);
    const recall = await send("/v1/memory/recall", {
      token: t.key,
      key: "r",
      body: '{"dataset":"\\udc00"}',
      headers: json,
    });
    expect(recall.status).toBe(200);
    const batch = await send("/v1/memory/working/messages:batch", {
      token: t.key,
      key: "b",
      body: '{"messages":[{"threadId":"thr_\\ud800","role":"user","content":"hi"}]}',
      headers: json,
    });
    expect([batch.status, batch.body.error]).toEqual([404, "Thread not found"]);
    const nul = await send("/v1/threads", {
      token: t.key,
      key: "n",
      body: '{"dataset":"idem\\u0000x"}',
      headers: json,
    });
    expect([nul.status, nul.body.issues?.[0]?.path]).toEqual([400, ["dataset"]]);
    // The erase finds the answer stored under the name as stored: the key runs anew after it.
    expect((await send("/v1/memory/recall/datasets/idem%EF%BF%BDx", { method: "DELETE", token: t.key })).status).toBe(
      200,
    );
    const again = await send("/v1/threads", {
      token: t.key,
      key: "s",
      body: '{"dataset":"idem\\ud800x"}',
      headers: json,
    });
    expect([again.status, again.replayed]).toEqual([201, null]);
  });

  it("stores the 4xx of a request that ran: a 404 is replayed, not re-run", async () => {
    const t = await newTenant(svc);
    await newThread(t.key);
    const missing = await send("/v1/threads/thr_missing", { method: "PATCH", token: t.key, key: "m", json: {} });
    expect(missing).toMatchObject({ status: 404, body: { error: "Thread not found" } });
    const missingAgain = await send("/v1/threads/thr_missing", { method: "PATCH", token: t.key, key: "m", json: {} });
    expect([missingAgain.status, missingAgain.replayed]).toEqual([404, "true"]);

    // DELETE with a key: the first answer is replayed (without a key the second would be a 404).
    const res = await send("/v1/memory/recall/datasets/idem", { method: "DELETE", token: t.key, key: "d" });
    expect(res.status).toBe(200);
    expect(res.body.deleted.threads).toBe(1);
    const resAgain = await send("/v1/memory/recall/datasets/idem", { method: "DELETE", token: t.key, key: "d" });
    expect([resAgain.status, resAgain.replayed, resAgain.text]).toEqual([200, "true", res.text]);
  });

  it("rejects an empty key, one over 255 characters, non-ASCII or two keys with the validation error naming the header", async () => {
    const t = await newTenant(svc);
    // "k1, k2": two header lines, as a proxy or client joins them: not one key.
    for (const key of ["", "x".repeat(256), "caf\u00e9", '""', "k1, k2", '"k1", "k2"']) {
      const res = await send("/v1/threads", { token: t.key, key, json: { dataset: "a" } });
      expect(res.status, JSON.stringify(key)).toBe(400);
      expect(res.body).toMatchObject({ error: "Validation error", issues: [{ path: ["Idempotency-Key"] }] });
    }
    expect(await count("threads", t.projectId)).toBe(0);
    // 255 characters is fine; a structured-field string "…" names the same key as the bare value.
    const long = await send("/v1/threads", { token: t.key, key: "y".repeat(255), json: { dataset: "a" } });
    expect(long.status).toBe(201);
    const bare = await send("/v1/threads", { token: t.key, key: "abc-1", json: { dataset: "a" } });
    const quoted = await send("/v1/threads", { token: t.key, key: '"abc-1"', json: { dataset: "a" } });
    expect([quoted.replayed, quoted.text]).toEqual(["true", bare.text]);
  });

  it("authentication stays first: a bad credential is 401 whatever the header, and looks up no key", async () => {
    const res = await measured("/v1/threads", { token: `mk_${"f".repeat(64)}`, key: "", json: { dataset: "a" } });
    expect(res).toMatchObject({ status: 401, body: { error: "Invalid API key" } });
    expect(res.statements).toHaveLength(1);
    const none = await send("/v1/threads", { key: "k", json: { dataset: "a" } });
    expect(none).toMatchObject({ status: 401, body: { error: "Missing or invalid Authorization header" } });
  });

  it("a 5xx releases the key: the retry runs, and its answer is the one replayed", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    for (let i = 0; i < 10; i++) {
      const said = await send(`${W}/${threadId}/messages`, { token: t.key, json: { role: "user", content: `m${i}` } });
      expect(said.status).toBe(201);
    }
    // Compaction calls the model before it writes: its 500 wrote nothing, so the retry may run.
    const compact = { token: t.key, key: "compact-1", json: {} };
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    try {
      const failed = await send(`${W}/${threadId}/compact`, compact);
      expect(failed.status).toBe(500);
    } finally {
      fake.clearFailures();
    }
    expect(await keyRows(t.projectId)).toBe(0);
    const retried = await send(`${W}/${threadId}/compact`, compact);
    expect(retried.status).toBe(200);
    expect(retried.replayed).toBeNull();
    const replayed = await send(`${W}/${threadId}/compact`, compact);
    expect([replayed.status, replayed.replayed, replayed.text]).toEqual([200, "true", retried.text]);
  });

  it("a chat that failed after storing its user message keeps its 500: a retry is replayed, not run again", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const chat = { token: t.key, key: "chat-1", json: { content: "hello once", recall: false } };
    fake.fail({ status: 500, times: Number.POSITIVE_INFINITY, endpoint: "chat" });
    let failed: Awaited<ReturnType<typeof send>>;
    try {
      failed = await send(`${W}/${threadId}/chat`, chat);
      expect(failed).toMatchObject({ status: 500, body: { error: "Failed to generate reply" } });
    } finally {
      fake.clearFailures();
    }
    // The client never saw that 500 (a reset connection) and retries under the same key.
    const retried = await send(`${W}/${threadId}/chat`, chat);
    expect([retried.status, retried.replayed, retried.text]).toEqual([500, "true", failed.text]);
    expect(await messageCount(threadId)).toBe(1);
    // A new key is a new turn.
    const again = await send(`${W}/${threadId}/chat`, { ...chat, key: "chat-2" });
    expect([again.status, again.replayed]).toEqual([200, null]);
    expect(await messageCount(threadId)).toBe(3);
  });

  it("a chat whose process died after storing its user message: the retry taking the claim over answers its 500, once", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const path = `${W}/${threadId}/chat`;
    const json = { content: "hello", recall: false };
    // A keyed chat that runs records on its claim that it wrote.
    const ran = await send(path, { token: t.key, key: "ran", json });
    expect(ran.status).toBe(200);
    const [marked] = rowsOf<{ wrote: boolean }>(
      await svc.deps.db.execute(
        sql`SELECT wrote_at IS NOT NULL AS wrote FROM idempotency_keys WHERE project_id = ${t.projectId} AND key = 'ran'`,
      ),
    );
    expect(marked.wrote).toBe(true);

    // Another one's process died after storing its user message: its claim is left, marked.
    const body = new TextEncoder().encode(JSON.stringify(json));
    const fingerprint = requestFingerprint("POST", path, body);
    const holder = await claimKey(svc.deps, { projectId: t.projectId, key: "died", fingerprint });
    if (holder.kind !== "claimed") throw new Error(`not claimed: ${holder.kind}`);
    expect(
      (await send(`${W}/${threadId}/messages`, { token: t.key, json: { role: "user", content: "hello" } })).status,
    ).toBe(201);
    await markWrote(holder.claim);
    expect(await messageCount(threadId)).toBe(3);
    // While its lease runs: 409. After it (run out here, not by the suite's shared clock, whose
    // time the expiry tests count on): the retry takes the claim over and answers the 500.
    expect((await send(path, { token: t.key, key: "died", json })).status).toBe(409);
    await svc.deps.db.execute(sql`
      UPDATE idempotency_keys SET locked_until = ${new Date(clock.now().getTime() - 1).toISOString()}::timestamptz
      WHERE project_id = ${t.projectId} AND key = 'died'`);
    const calls = fake.chatCalls().length;
    const retry = await send(path, { token: t.key, key: "died", json });
    expect([retry.status, retry.body.error, retry.replayed]).toEqual([500, "Failed to generate reply", null]);
    const again = await send(path, { token: t.key, key: "died", json });
    expect([again.status, again.replayed]).toEqual([500, "true"]);
    expect(await messageCount(threadId)).toBe(3);
    expect(fake.chatCalls()).toHaveLength(calls);

    const expire = (key: string) =>
      svc.deps.db.execute(sql`
        UPDATE idempotency_keys SET locked_until = ${new Date(clock.now().getTime() - 1).toISOString()}::timestamptz
        WHERE project_id = ${t.projectId} AND key = ${key}`);
    const diedHolding = async (key: string) => {
      const held = await claimKey(svc.deps, { projectId: t.projectId, key, fingerprint });
      if (held.kind !== "claimed") throw new Error(`not claimed: ${held.kind}`);
      await markWrote(held.claim);
      await expire(key);
    };
    // A retry that took such a claim over and died too before storing the 500: the next still knows.
    await diedHolding("twice");
    const taker = await claimKey(svc.deps, { projectId: t.projectId, key: "twice", fingerprint });
    expect(taker).toMatchObject({ kind: "claimed", takenOver: true, holderWrote: true });
    await expire("twice");
    const third = await send(path, { token: t.key, key: "twice", json });
    expect([third.status, third.body.error]).toEqual([500, "Failed to generate reply"]);
    // Another request under a dead chat's key is not that chat: it runs.
    await diedHolding("reused");
    const other = await send("/v1/threads", { token: t.key, key: "reused", json: { dataset: "idem" } });
    expect(other.status).toBe(201);
    expect(await messageCount(threadId)).toBe(3);
  });

  it("a chat whose reply carries a NUL character stores it without one, once, and replays it", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    fake.onText(() => `A reply${String.fromCharCode(0)} with a NUL.`);
    try {
      const chat = { token: t.key, key: "chat-nul", json: { content: "hello", recall: false } };
      const first = await send(`${W}/${threadId}/chat`, chat);
      expect([first.status, first.body.reply.content]).toEqual([200, "A reply with a NUL."]);
      const again = await send(`${W}/${threadId}/chat`, chat);
      expect([again.status, again.replayed]).toEqual([200, "true"]);
      expect(await messageCount(threadId)).toBe(2);
    } finally {
      fake.onText(() => "A short reply.");
    }
  });

  it("a streamed chat is held while it streams, then its events are kept: a repeat gets them and stores nothing", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const init = {
      token: t.key,
      key: "sse",
      headers: { accept: "text/event-stream" },
      json: { content: "stream me", recall: false },
    };
    const headers = { "Idempotency-Key": "sse", accept: "text/event-stream" };
    const streaming = await svc.request(`${W}/${threadId}/chat`, { ...init, method: "POST", headers });
    expect(streaming.status).toBe(200);
    expect(streaming.headers.get("content-type")).toMatch(/text\/event-stream/);
    // Held while it streams: a repeat meanwhile is 409.
    expect((await send(`${W}/${threadId}/chat`, init)).status).toBe(409);
    const original = await streaming.text();
    expect(original).toMatch(/event: done/);
    await svc.settle();

    const again = await send(`${W}/${threadId}/chat`, init);
    expect(again.status).toBe(200);
    expect(again.replayed).toBe("true");
    expect(again.contentType).toMatch(/^text\/event-stream/);
    // The same start and done, the deltas as one.
    const events = (text: string) =>
      text
        .split("\n\n")
        .filter(Boolean)
        .map((block) => ({
          event: /^event: (.*)$/m.exec(block)?.[1],
          data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? ""),
        }));
    const first = events(original);
    const replay = events(again.text);
    const text = first
      .filter((e) => e.event === "delta")
      .map((e) => e.data.content)
      .join("");
    expect(replay).toEqual([first[0], { event: "delta", data: { content: text } }, first.at(-1)]);
    expect(await messageCount(threadId)).toBe(2); // one turn: user and assistant
  });

  it("a keyed streamed chat whose client left keeps its failure: a repeat gets start and error, and stores nothing", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    fake.onText(() => Array.from({ length: 40 }, (_, i) => `w${i}`).join(" "));
    fake.streamChunkDelayMs = 20;
    try {
      const init = {
        token: t.key,
        key: "left",
        headers: { accept: "text/event-stream" },
        json: { content: "talk", recall: false },
      };
      const res = await svc.request(`${W}/${threadId}/chat`, {
        ...init,
        method: "POST",
        headers: { "Idempotency-Key": "left", accept: "text/event-stream" },
      });
      const reader = res.body?.getReader();
      let seen = "";
      while (reader && !seen.includes("event: delta")) seen += new TextDecoder().decode((await reader.read()).value);
      await reader?.cancel();
      await expect
        .poll(async () => (await send(`${W}/${threadId}/chat`, init)).replayed, { timeout: 5000 })
        .toBe("true");
      const again = await send(`${W}/${threadId}/chat`, init);
      expect(again.text).toMatch(
        /^event: start\ndata: .*\n\n(event: delta\ndata: .*\n\n)?event: error\ndata: \{"error":"Failed to generate reply"\}\n\n$/,
      );
      expect(await messageCount(threadId)).toBe(1); // the user message alone, stored once
    } finally {
      fake.streamChunkDelayMs = 0;
      fake.onText(() => "A short reply.");
    }
  });

  it("expires after IDEMPOTENCY_TTL_MS: the repeat runs again, and the sweep deletes expired keys", async () => {
    const t = await newTenant(svc);
    const init = { token: t.key, key: "ttl", json: { dataset: "a" } };
    const first = await send("/v1/threads", init);
    clock.advance(TTL - 1);
    expect((await send("/v1/threads", init)).replayed).toBe("true");
    expect((await sweep(svc.deps)).expiredKeys).toBe(0);
    clock.advance(1);
    const later = await send("/v1/threads", init);
    expect(later.status).toBe(201);
    expect(later.replayed).toBeNull();
    expect(later.body.threadId).not.toBe(first.body.threadId);
    expect(await count("threads", t.projectId)).toBe(2);
    expect(await keyRows(t.projectId)).toBe(1);

    clock.advance(TTL);
    expect((await sweep(svc.deps)).expiredKeys).toBeGreaterThanOrEqual(1);
    expect(await keyRows(t.projectId)).toBe(0);
  });

  it("a sweep deletes a backlog of expired keys larger than one batch, and keeps keys not yet expired", async () => {
    const t = await newTenant(svc);
    const now = clock.now().getTime();
    // 12,000 answers kept past their time (a busy day's keyed writes) and 3 still in force.
    await svc.deps.db.execute(sql`
      INSERT INTO idempotency_keys (project_id, key, fingerprint, claim_id, response_status, response_body,
        response_content_type, created_at, expires_at)
      SELECT ${t.projectId}, 'k' || g, 'f', 'c', 201, '{}', 'application/json',
        ${new Date(now - TTL - 60_000).toISOString()}::timestamptz,
        CASE WHEN g <= 3 THEN ${new Date(now + 60_000).toISOString()}::timestamptz
          ELSE ${new Date(now).toISOString()}::timestamptz - make_interval(secs => g) END
      FROM generate_series(1, 12003) g`);
    expect((await sweep(svc.deps)).expiredKeys).toBe(12_000);
    expect(await keyRows(t.projectId)).toBe(3);
  });

  it("a claim whose process died is 409 until its lease runs out, then taken over", async () => {
    const t = await newTenant(svc);
    const path = "/v1/threads";
    const body = JSON.stringify({ dataset: "a" });
    // A request that claimed the key and never answered (its process died).
    const dead = await claimKey(svc.deps, {
      projectId: t.projectId,
      key: "dead",
      fingerprint: requestFingerprint("POST", path, new TextEncoder().encode(body)),
    });
    expect(dead.kind).toBe("claimed");
    const init = { token: t.key, key: "dead", headers: { "content-type": "application/json" }, body };
    expect(await send(path, init)).toMatchObject({ status: 409, retryAfter: "1" });
    clock.advance(CLAIM_LEASE_MS);
    const taken = await send(path, init);
    expect(taken.status).toBe(201);
    expect(taken.replayed).toBeNull();
    expect((await send(path, init)).replayed).toBe("true");
    expect(await count("threads", t.projectId)).toBe(1);
  });

  it("a claim still running past IDEMPOTENCY_TTL_MS (its lease renewed) is neither taken over nor swept", async () => {
    const t = await newTenant(svc);
    const fingerprint = requestFingerprint("POST", "/v1/threads", new TextEncoder().encode("{}"));
    const claimed = await claimKey(svc.deps, { projectId: t.projectId, key: "long", fingerprint });
    if (claimed.kind !== "claimed") throw new Error(`claimed: ${claimed.kind}`);
    // The request runs on, renewing its lease, past the key's time.
    const start = clock.now().getTime();
    while (clock.now().getTime() - start <= TTL) {
      clock.advance(CLAIM_LEASE_MS / 2);
      expect(await renewClaim(svc.deps, claimed.claim)).toBe(true);
    }
    expect((await claimKey(svc.deps, { projectId: t.projectId, key: "long", fingerprint })).kind).toBe("running");
    await sweep(svc.deps);
    expect(await keyRows(t.projectId)).toBe(1);
    // Once it stops renewing (its process died), the lease runs out and the key is free.
    clock.advance(CLAIM_LEASE_MS);
    expect((await claimKey(svc.deps, { projectId: t.projectId, key: "long", fingerprint })).kind).toBe("claimed");
  });

  it("leaves GET alone, and documents the header with its 400, 409 and 422 on every /v1 write", async () => {
    const t = await newTenant(svc);
    const threadId = await newThread(t.key);
    const get = await send(`/v1/threads/${threadId}`, { method: "GET", token: t.key, key: "" });
    expect(get.status).toBe(200);

    const { routes } = await documentedRoutes(svc);
    const writes = routes.filter((r) => r.path.startsWith("/v1/") && ["POST", "PATCH", "DELETE"].includes(r.method));
    expect(writes.length).toBeGreaterThanOrEqual(10);
    for (const route of routes) {
      const header = route.op.parameters?.find((p) => p.name === "Idempotency-Key");
      if (!writes.includes(route)) {
        expect(header, route.label).toBeUndefined();
        continue;
      }
      expect(header, route.label).toMatchObject({ in: "header", schema: { type: "string", maxLength: 255 } });
      expect(header?.required ?? false).toBe(false);
      const responses = (route.op as { responses?: Record<string, unknown> }).responses ?? {};
      expect(Object.keys(responses), route.label).toEqual(expect.arrayContaining(["400", "409", "422"]));
    }
  });
});

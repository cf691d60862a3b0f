import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { rowsOf } from "../../lib/db/rows";
import { runDueJobs, sweep } from "../../lib/jobs/runner";
import { eraseDataset } from "../../lib/recall/dataset";
import { DISABLE_AFTER_MS, nextAttemptAt, SECRET_OVERLAP_MS } from "../../lib/webhooks/deliver";
import { compactThread } from "../../lib/working/compaction";
import type { ApiSchema } from "../helpers/api-types";
import { useEpisodicService } from "../helpers/episodic-fixtures";
import { adminSession } from "../helpers/service";

/**
 * Issue 19 part 3, signed webhooks: endpoints registered through the dashboard API, deliveries
 * signed per Standard Webhooks through the job queue, retried with backoff for a day, each attempt
 * recorded; a day of failures disables the endpoint; replay; SSRF refusals at delivery time.
 * A local receiver on 127.0.0.1 (WEBHOOKS_ALLOW_HTTP) and a manual clock; a short attempt timeout.
 */
// Long enough that a loaded CI machine (the PostgreSQL run beside the load test) answers in time:
// at 300 ms a delivery that should have succeeded once timed out there.
const TIMEOUT_MS = 2_000;
const DAY_MS = 86_400_000;
const { h, tenant, json } = useEpisodicService({
  env: { WEBHOOKS_ALLOW_HTTP: "true", WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) },
});

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver whose answer each test sets: a status (and headers), or `hang` (never answers). */
const receiver = {
  server: undefined as Server | undefined,
  url: "",
  received: [] as Received[],
  answer: (() => ({ status: 204 })) as () => { status: number; headers?: Record<string, string> } | "hang",
};

beforeAll(async () => {
  receiver.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      receiver.received.push({
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      const answer = receiver.answer();
      if (answer === "hang") return;
      res.writeHead(answer.status, answer.headers).end("ok");
    });
  });
  await new Promise<void>((resolve) => receiver.server?.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  receiver.server?.closeAllConnections();
  await new Promise((resolve) => receiver.server?.close(resolve));
});
afterEach(() => {
  receiver.received = [];
  receiver.answer = () => ({ status: 204 });
  receiver.server?.closeAllConnections();
});

async function session() {
  return adminSession(h.svc);
}

async function createEndpoint(projectId: string, eventTypes: string[], url = receiver.url) {
  const res = await h.svc.request("/dashboard/webhooks", {
    method: "POST",
    token: await session(),
    json: { projectId, url, eventTypes },
  });
  return json<{ secret: string; endpoint: { id: string } }>(res, 201);
}

async function endpoints(projectId: string) {
  const res = await h.svc.request(`/dashboard/webhooks?projectId=${projectId}`, { token: await session() });
  return (await json<{ endpoints: Record<string, unknown>[] }>(res, 200)).endpoints;
}

/** A delivery as the dashboard lists it; the document leaves the event payload's shape open. */
type Delivery = ApiSchema<"WebhookDelivery"> & {
  payload: { type: string; timestamp: string; data: Record<string, unknown> };
};

async function deliveries(endpointId: string) {
  const res = await h.svc.request(`/dashboard/webhooks/${endpointId}/deliveries`, { token: await session() });
  return (await json<{ deliveries: Delivery[]; total: number }>(res, 200)).deliveries;
}

/** An event with no model call: erasing a dataset. */
async function eraseEvent(projectId: string) {
  await eraseDataset({ deps: h.svc.deps, projectId }, { dataset: "ds" });
}

/** Runs the due jobs after moving the clock to the delivery's next attempt. */
async function runNextAttempt(endpointId: string) {
  const [d] = await deliveries(endpointId);
  if (d.nextAttemptAt) h.clock.set(new Date(d.nextAttemptAt));
  await runDueJobs(h.svc.deps);
}

/** Runs the endpoint's one delivery attempt after attempt until it is no longer pending. */
async function runUntilDone(endpointId: string) {
  let [d] = await deliveries(endpointId);
  while (d.status === "pending") {
    await runNextAttempt(endpointId);
    [d] = await deliveries(endpointId);
  }
  return d;
}

describe("webhooks", () => {
  it("an episode completing delivers a signed episode.completed (Standard Webhooks)", async () => {
    // The receiver checks the timestamp against the real time: start the manual clock there.
    h.clock.set(new Date());
    const t = await tenant("webhooks");
    const { secret, endpoint } = await createEndpoint(t.projectId, ["episode.completed"]);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    // The secret is shown once: the list never carries it.
    expect(JSON.stringify(await endpoints(t.projectId))).not.toContain(secret);

    const threadId = await t.thread("ds");
    await t.say(threadId, "I moved to Lisbon in May");
    const { episodeId } = await t.end(threadId);
    const rings = h.svc.rings.length;
    await runDueJobs(h.svc.deps);
    // The delivery's job was rung as soon as the event was written.
    expect(h.svc.rings.slice(rings).some((r) => r.key.startsWith("webhook:"))).toBe(true);

    expect(receiver.received).toHaveLength(1);
    const [got] = receiver.received;
    const payload = new Webhook(secret).verify(got.body, {
      "webhook-id": String(got.headers["webhook-id"]),
      "webhook-timestamp": String(got.headers["webhook-timestamp"]),
      "webhook-signature": String(got.headers["webhook-signature"]),
    }) as Delivery["payload"];
    expect(payload.type).toBe("episode.completed");
    expect(payload.data).toMatchObject({ episodeId, threadId, dataset: "ds", summary: "I moved to Lisbon in May" });
    expect(got.headers["content-type"]).toBe("application/json");
    // A wrong secret does not verify.
    expect(() =>
      new Webhook(`whsec_${Buffer.from("x".repeat(24)).toString("base64")}`).verify(
        got.body,
        got.headers as Record<string, string>,
      ),
    ).toThrow();

    const [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ id: got.headers["webhook-id"], status: "succeeded", attempts: 1, lastStatusCode: 204 });
    // A delivery's id is its own kind (lib/ids.ts), not a chat message's `msg_`.
    expect(d.id).toMatch(/^whd_[0-9a-f]{32}$/);
    expect(d.attemptLog).toHaveLength(1);
    const [listed] = await endpoints(t.projectId);
    expect(listed).toMatchObject({
      disabledAt: null,
      nextAttemptAt: null,
      lastDelivery: { status: "succeeded", statusCode: 204 },
    });
    // Other event types are not sent to an endpoint that did not ask for them.
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(receiver.received).toHaveLength(1);
  });

  it("emits episode.failed, facts.extracted and thread.compacted where they happen", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, [
      "episode.completed",
      "episode.failed",
      "facts.extracted",
      "thread.compacted",
      "dataset.erased",
    ]);
    const types = async () => (await deliveries(endpoint.id)).map((d) => `${d.payload.type}:${d.status}`).sort();

    h.fake.fail({ status: 500, times: 1, endpoint: "chat" });
    const failing = await t.thread("ds");
    await t.say(failing, "this summary fails");
    const { episodeId: failedId } = await t.end(failing);
    await runDueJobs(h.svc.deps);
    expect(await types()).toEqual(["episode.failed:succeeded"]);
    const [failed] = await deliveries(endpoint.id);
    expect(failed.payload.data).toMatchObject({ episodeId: failedId, dataset: "ds", error: expect.any(String) });

    h.fake.onStructured("fact_extraction", () => ({
      facts: [
        {
          subject: "user",
          predicate: "prefers",
          object: "aisle seats",
          objectIsEntity: false,
          confidence: 0.9,
          sourceQuote: "I prefer aisle seats",
          validAt: null,
        },
      ],
      entities: [],
    }));
    const facts = await t.thread("ds");
    await t.say(facts, "I prefer aisle seats");
    const { episodeId } = await t.end(facts);
    await runDueJobs(h.svc.deps);
    expect(await types()).toEqual([
      "episode.completed:succeeded",
      "episode.failed:succeeded",
      "facts.extracted:succeeded",
    ]);
    const extracted = (await deliveries(endpoint.id)).find((d) => d.payload.type === "facts.extracted");
    expect(extracted?.payload.data).toEqual({ episodeId, threadId: facts, dataset: "ds" });

    // The same fact again: a duplicate, nothing written, no facts.extracted.
    const again = await t.thread("ds");
    await t.say(again, "I prefer aisle seats");
    await t.end(again);
    await runDueJobs(h.svc.deps);
    expect(await types()).toEqual([
      "episode.completed:succeeded",
      "episode.completed:succeeded",
      "episode.failed:succeeded",
      "facts.extracted:succeeded",
    ]);

    h.fake.onText(() => "An earlier conversation about seats.");
    const long = await t.thread("ds");
    await t.conversation(
      long,
      Array.from({ length: 9 }, (_, i) => `message ${i}`),
    );
    const compacted = await compactThread({ deps: h.svc.deps, projectId: t.projectId }, { threadId: long });
    await runDueJobs(h.svc.deps);
    const folded = (await deliveries(endpoint.id)).find((d) => d.payload.type === "thread.compacted");
    expect(folded?.payload.data).toMatchObject({ threadId: long, dataset: "ds", compactedCount: 3 });
    expect(compacted).toMatchObject({ compactedCount: 3 });
  });

  it("retries a failing receiver with exponential backoff until it recovers, recording every attempt", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    let calls = 0;
    receiver.answer = () => (++calls <= 2 ? { status: 500 } : { status: 200 });
    const start = h.clock.now().getTime();
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    let [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ status: "pending", attempts: 1, lastStatusCode: 500, lastError: "HTTP 500" });
    expect(Date.parse(d.nextAttemptAt as string) - start).toBe(30_000);
    // Not due yet: nothing runs.
    await runDueJobs(h.svc.deps);
    expect(receiver.received).toHaveLength(1);
    expect((await endpoints(t.projectId))[0]).toMatchObject({ nextAttemptAt: d.nextAttemptAt });

    await runNextAttempt(endpoint.id);
    [d] = await deliveries(endpoint.id);
    expect(d.attempts).toBe(2);
    expect(Date.parse(d.nextAttemptAt as string) - h.clock.now().getTime()).toBe(60_000);
    expect((await endpoints(t.projectId))[0].failingSince).not.toBeNull();

    await runNextAttempt(endpoint.id);
    [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({
      status: "succeeded",
      attempts: 3,
      nextAttemptAt: null,
      lastStatusCode: 200,
      lastError: null,
    });
    expect(d.attemptLog.map((a) => a.statusCode)).toEqual([200, 500, 500]);
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual(Array(3).fill(d.id));
    // A success ends the endpoint's failure streak.
    expect((await endpoints(t.projectId))[0]).toMatchObject({ failingSince: null, disabledAt: null });
  });

  it("lists a failing delivery among the project's jobs retrying, with its error; Retry now delivers it at once", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => ({ status: 500 });
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    const token = await session();
    const listed = await json<{ jobs: ApiSchema<"FailingJob">[] }>(
      await h.svc.request(`/dashboard/projects/${t.projectId}/failing-jobs`, { token }),
      200,
    );
    const [d] = await deliveries(endpoint.id);
    expect(listed.jobs).toEqual([
      expect.objectContaining({ kind: "webhook", error: "HTTP 500", attempts: 1, nextRunAt: d.nextAttemptAt }),
    ]);

    receiver.answer = () => ({ status: 204 });
    const retried = await h.svc.request(
      `/dashboard/projects/${t.projectId}/failing-jobs/${listed.jobs[0].jobId}/retry`,
      { method: "POST", token },
    );
    expect(retried.status).toBe(200);
    await runDueJobs(h.svc.deps);
    expect((await deliveries(endpoint.id))[0]).toMatchObject({ status: "succeeded", attempts: 2 });
    expect(receiver.received).toHaveLength(2);
  });

  it("records a hanging receiver's timeout and a redirect as failed attempts", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => "hang";
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    let [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ status: "pending", lastStatusCode: null, lastError: `Timed out after ${TIMEOUT_MS} ms` });
    expect(d.attemptLog[0].durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);

    receiver.answer = () => ({ status: 302, headers: { location: "http://127.0.0.1:1/elsewhere" } });
    await runNextAttempt(endpoint.id);
    [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ status: "pending", attempts: 2, lastStatusCode: 302 });
    expect(d.lastError).toMatch(/^Redirect \(302\) not followed/);
    expect(receiver.received).toHaveLength(2);
  });

  it("a delivery deleted during its attempt (its endpoint deleted): nothing recorded, no job failure logged or kept", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => "hang";
    await eraseEvent(t.projectId);
    const errors = vi.spyOn(h.svc.deps.log, "error");
    try {
      const running = runDueJobs(h.svc.deps);
      await vi.waitFor(() => expect(receiver.received).toHaveLength(1));
      const deleted = await h.svc.request(`/dashboard/webhooks/${endpoint.id}`, {
        method: "DELETE",
        token: await session(),
      });
      expect(deleted.status).toBe(204);
      await running;
      expect(errors).not.toHaveBeenCalled();
      const [{ n }] = rowsOf<{ n: number }>(
        await h.svc.deps.db.execute(
          sql`SELECT count(*)::int AS n FROM jobs WHERE kind = 'webhook' AND last_error IS NOT NULL`,
        ),
      );
      expect(Number(n)).toBe(0);
    } finally {
      errors.mockRestore();
    }
  });

  it("gives up after a day and disables an endpoint that failed for a day, with the reason; enable and replay", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => ({ status: 503 });
    const start = h.clock.now().getTime();
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    let d = await runUntilDone(endpoint.id);
    expect(d.status).toBe("failed");
    expect(h.clock.now().getTime() - start).toBe(DISABLE_AFTER_MS);
    expect(d.attempts).toBeGreaterThan(10);
    expect(d.attempts).toBeLessThan(25);
    const [listed] = await endpoints(t.projectId);
    expect(listed.disabledAt).toBe(h.clock.now().toISOString());
    expect(listed.disabledReason).toMatch(/failed for a day.*HTTP 503/);

    // Disabled: a new event makes no delivery; a replay is refused until the endpoint is enabled.
    await eraseEvent(t.projectId);
    expect(await deliveries(endpoint.id)).toHaveLength(1);
    const token = await session();
    let res = await h.svc.request(`/dashboard/webhooks/deliveries/${d.id}/replay`, { method: "POST", token });
    await json(res, 409);
    res = await h.svc.request(`/dashboard/webhooks/${endpoint.id}/enable`, { method: "POST", token });
    expect((await json<{ endpoint: { disabledAt: null } }>(res, 200)).endpoint.disabledAt).toBeNull();

    receiver.answer = () => ({ status: 200 });
    res = await h.svc.request(`/dashboard/webhooks/deliveries/${d.id}/replay`, { method: "POST", token });
    const replayed = (await json<{ delivery: Delivery }>(res, 200)).delivery;
    expect(replayed).toMatchObject({ id: d.id, status: "pending", nextAttemptAt: h.clock.now().toISOString() });
    const before = receiver.received.length;
    await runDueJobs(h.svc.deps);
    expect(receiver.received).toHaveLength(before + 1);
    expect(receiver.received.at(-1)?.headers["webhook-id"]).toBe(d.id);
    [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ status: "succeeded", lastStatusCode: 200 });
  });

  it("disables the endpoint when a delivery failed through its whole day, though its first attempt was the slowest", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    // The first attempt takes 5 s and the last one none: the failure streak starts 5 s after the
    // event, and the last attempt ends at the end of the delivery's day, less than a day later.
    let answered = 0;
    receiver.answer = () => {
      if (answered++ === 0) h.clock.advance(5_000);
      return { status: 503 };
    };
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    const d = await runUntilDone(endpoint.id);
    expect(d.status).toBe("failed");
    const [listed] = await endpoints(t.projectId);
    expect(listed.disabledAt).toBe(h.clock.now().toISOString());
    expect(listed.disabledReason).toMatch(/failed for a day.*HTTP 503/);
  });

  it("keeps the endpoint enabled when a delivery's first attempt came late and only its window's tail failed", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => ({ status: 503 });
    await eraseEvent(t.projectId);
    // The service was down for 23.5 hours after the event: the first attempt runs then.
    h.clock.advance(DISABLE_AFTER_MS - 30 * 60_000);
    await runDueJobs(h.svc.deps);
    const d = await runUntilDone(endpoint.id);
    expect(d.status).toBe("failed");
    expect((await endpoints(t.projectId))[0]).toMatchObject({ disabledAt: null });
  });

  it("a streak that ended without a success (its delivery erased; a late delivery's tail) does not disable the endpoint on one failure days later", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["episode.completed", "dataset.erased"]);
    receiver.answer = () => ({ status: 503 });
    // A failing delivery whose dataset is then erased: its delivery goes, the streak stays.
    const threadId = await t.thread("x");
    await t.say(threadId, "I moved to Lisbon in May");
    await t.end(threadId);
    await runDueJobs(h.svc.deps);
    expect((await endpoints(t.projectId))[0]).toMatchObject({ failingSince: expect.any(String) });
    await eraseDataset({ deps: h.svc.deps, projectId: t.projectId }, { dataset: "x" });
    await runDueJobs(h.svc.deps);
    // The erase's own delivery fails through a late start's tail, leaving the endpoint enabled.
    h.clock.advance(DISABLE_AFTER_MS - 30 * 60_000);
    await runDueJobs(h.svc.deps);
    expect(await runUntilDone(endpoint.id)).toMatchObject({ status: "failed" });
    expect((await endpoints(t.projectId))[0]).toMatchObject({ disabledAt: null });
    // Two days on nothing has failed for long: the streak shows as over.
    h.clock.advance(2 * DAY_MS);
    expect((await endpoints(t.projectId))[0]).toMatchObject({ failingSince: null, disabledAt: null });
    // One failed attempt (a deploy's 502) starts a new streak; it does not disable the endpoint.
    receiver.answer = () => ({ status: 502 });
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect((await endpoints(t.projectId))[0]).toMatchObject({
      failingSince: h.clock.now().toISOString(),
      disabledAt: null,
      pendingDeliveries: 1,
    });
  });

  it("a replay while an attempt is in flight is sent after it, not beside it", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    // The first attempt gets no answer (a timeout), the next a 204.
    let answered = 0;
    receiver.answer = () => (answered++ === 0 ? "hang" : { status: 204 });
    await eraseEvent(t.projectId);
    const running = runDueJobs(h.svc.deps);
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1));
    const [d] = await deliveries(endpoint.id);
    const res = await h.svc.request(`/dashboard/webhooks/deliveries/${d.id}/replay`, {
      method: "POST",
      token: await session(),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await runDueJobs(h.svc.deps);
    expect(receiver.received).toHaveLength(1);
    await running; // the attempt in flight times out: the replay is its retry
    await runNextAttempt(endpoint.id);
    const [after] = await deliveries(endpoint.id);
    expect(receiver.received).toHaveLength(2);
    expect(after).toMatchObject({ status: "succeeded", attempts: 2 });
    expect(after.attemptLog.map((a) => a.statusCode)).toEqual([204, null]); // newest first
  });

  it("keeps an endpoint that succeeded during a failed delivery's day enabled", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => ({ status: 503 });
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    let [first] = await deliveries(endpoint.id);
    // Half a day in, another event is delivered: the streak starts again after it.
    while (Date.parse(first.nextAttemptAt ?? "") - Date.parse(first.createdAt) < DISABLE_AFTER_MS / 2) {
      await runNextAttempt(endpoint.id);
      [first] = await deliveries(endpoint.id);
    }
    receiver.answer = () => ({ status: 200 });
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    receiver.answer = () => ({ status: 503 });
    let pending = (await deliveries(endpoint.id)).find((d) => d.status === "pending");
    while (pending) {
      if (pending.nextAttemptAt) h.clock.set(new Date(pending.nextAttemptAt));
      await runDueJobs(h.svc.deps);
      pending = (await deliveries(endpoint.id)).find((d) => d.status === "pending");
    }
    const all = await deliveries(endpoint.id);
    expect(all.map((d) => d.status).sort()).toEqual(["failed", "succeeded"]);
    expect((await endpoints(t.projectId))[0]).toMatchObject({ disabledAt: null });
  });

  it("refuses private addresses: at registration (400) and at delivery (recorded)", async () => {
    const t = await tenant("webhooks");
    const token = await session();
    for (const url of [
      "https://169.254.169.254/latest",
      "https://10.0.0.1/hook",
      "http://example.com/hook",
      "https://metadata.google.internal/x",
    ]) {
      const res = await h.svc.request("/dashboard/webhooks", {
        method: "POST",
        token,
        json: { projectId: t.projectId, url, eventTypes: ["dataset.erased"] },
      });
      const refusal = await json<{ error: string; issues: { path: string[] }[] }>(res, 400);
      expect({ url, error: refusal.error, paths: refusal.issues.map((i) => i.path) }).toEqual({
        url,
        error: "Validation error",
        paths: [["url"]],
      });
    }
    // Stored before a policy change (or by hand): refused when it is delivered, never requested.
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    await h.svc.deps.db.execute(
      sql`UPDATE webhook_endpoints SET url = 'https://192.168.0.10/hook' WHERE id = ${endpoint.id}`,
    );
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    const [d] = await deliveries(endpoint.id);
    expect(d.lastError).toMatch(/^Refused: The address 192\.168\.0\.10 is private/);
    expect(receiver.received).toHaveLength(0);
  });

  it("validates input, 404s unknown ids, and deletes an endpoint with its deliveries", async () => {
    const t = await tenant("webhooks");
    const token = await session();
    let res = await h.svc.request("/dashboard/webhooks", {
      method: "POST",
      token,
      json: { projectId: t.projectId, url: receiver.url, eventTypes: ["no.such.event"] },
    });
    await json(res, 400);
    res = await h.svc.request("/dashboard/webhooks", {
      method: "POST",
      token,
      json: { projectId: "prj_missing", url: receiver.url, eventTypes: ["dataset.erased"] },
    });
    await json(res, 404);
    res = await h.svc.request(`/dashboard/webhooks?projectId=${t.projectId}`);
    expect(res.status).toBe(401);
    // Paged as the dashboard's other lists: limit 1-100, offset, and the project's total.
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await createEndpoint(t.projectId, ["dataset.erased"])).endpoint.id);
    const page = async (query: string) =>
      json<{ endpoints: { id: string }[]; total: number }>(
        await h.svc.request(`/dashboard/webhooks?projectId=${t.projectId}${query}`, { token }),
        200,
      );
    const first = await page("&limit=2");
    const rest = await page("&limit=2&offset=2");
    expect({ first: first.endpoints.length, rest: rest.endpoints.length, total: first.total }).toEqual({
      first: 2,
      rest: 1,
      total: 3,
    });
    expect([...first.endpoints, ...rest.endpoints].map((e) => e.id).sort()).toEqual([...made].sort());
    for (const bad of ["&limit=0", "&limit=101", "&offset=-1"]) {
      res = await h.svc.request(`/dashboard/webhooks?projectId=${t.projectId}${bad}`, { token });
      expect(res.status, bad).toBe(400);
    }
    for (const id of made) {
      expect((await h.svc.request(`/dashboard/webhooks/${id}`, { method: "DELETE", token })).status).toBe(204);
    }

    receiver.answer = () => ({ status: 500 });
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    res = await h.svc.request(`/dashboard/webhooks/${endpoint.id}`, { method: "DELETE", token });
    expect(res.status).toBe(204);
    expect(await endpoints(t.projectId)).toEqual([]);
    const left = rowsOf(
      await h.svc.deps.db.execute(sql`SELECT 1 FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`),
    );
    expect(left).toHaveLength(0);
    // Its pending retry's job is gone too (or finds nothing and ends).
    h.clock.advance(60_000);
    await runDueJobs(h.svc.deps);
    expect(receiver.received).toHaveLength(1);
    res = await h.svc.request(`/dashboard/webhooks/${endpoint.id}`, { method: "DELETE", token });
    expect(res.status).toBe(404);
    res = await h.svc.request("/dashboard/webhooks/deliveries/msg_missing/replay", { method: "POST", token });
    await json(res, 404);
  });

  it("deletes a finished delivery and its attempts WEBHOOK_RETENTION_DAYS (30) after its last retry window, a replay restarting the count", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    await eraseEvent(t.projectId);
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    const [kept, old] = await deliveries(endpoint.id);
    expect([kept.status, old.status], `errors: ${kept.lastError}, ${old.lastError}`).toEqual([
      "succeeded",
      "succeeded",
    ]);
    const windowClosed = new Date(old.retryUntil).getTime();

    // Ten days on, one of them is replayed: its window closes a day after the replay.
    h.clock.advance(10 * DAY_MS);
    const replay = (id: string) =>
      session().then((token) =>
        h.svc.request(`/dashboard/webhooks/deliveries/${id}/replay`, { method: "POST", token }),
      );
    const res = await replay(kept.id);
    await json(res, 200);
    await runDueJobs(h.svc.deps);

    const attemptsOf = async (id: string) =>
      rowsOf(await h.svc.deps.db.execute(sql`SELECT 1 FROM webhook_attempts WHERE delivery_id = ${id}`)).length;
    expect(await attemptsOf(old.id)).toBe(1);
    h.clock.set(new Date(windowClosed + 30 * DAY_MS));
    await sweep(h.svc.deps);
    expect((await deliveries(endpoint.id)).map((d) => d.id)).toEqual([kept.id, old.id]);
    h.clock.advance(1);
    expect((await sweep(h.svc.deps)).expiredDeliveries).toBeGreaterThanOrEqual(1);
    expect((await deliveries(endpoint.id)).map((d) => d.id)).toEqual([kept.id]);
    expect(await attemptsOf(old.id)).toBe(0);
    expect(await attemptsOf(kept.id)).toBe(2);
    await json(await replay(old.id), 404);

    h.clock.advance(10 * DAY_MS);
    await sweep(h.svc.deps);
    expect(await deliveries(endpoint.id)).toEqual([]);
  });
});

/** A PATCH of an endpoint through the dashboard API. */
async function patchEndpoint(id: string, body: unknown) {
  return h.svc.request(`/dashboard/webhooks/${id}`, { method: "PATCH", token: await session(), json: body });
}

async function rotateSecret(id: string) {
  return h.svc.request(`/dashboard/webhooks/${id}/rotate-secret`, { method: "POST", token: await session() });
}

/**
 * Whether a receiver holding `secret` accepts the request, as it would when it came: the library
 * checks the timestamp against the real time, read here from the service's manual clock.
 */
function verifies(secret: string, got: Received): boolean {
  const now = vi.spyOn(Date, "now").mockReturnValue(h.clock.now().getTime());
  try {
    new Webhook(secret).verify(got.body, {
      "webhook-id": String(got.headers["webhook-id"]),
      "webhook-timestamp": String(got.headers["webhook-timestamp"]),
      "webhook-signature": String(got.headers["webhook-signature"]),
    });
    return true;
  } catch {
    return false;
  } finally {
    now.mockRestore();
  }
}

/** Which of `secrets` verify the request last received (by their names). */
function verifiedBy(secrets: Record<string, string>): string[] {
  const got = receiver.received.at(-1) as Received;
  return Object.entries(secrets).flatMap(([name, secret]) => (verifies(secret, got) ? [name] : []));
}

describe("editing an endpoint", () => {
  it("changes its URL and event types, keeps its history, and its pending delivery goes to the new URL", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    receiver.answer = () => ({ status: 503 });
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    let [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ status: "pending", attempts: 1 });
    expect(receiver.received.map((r) => r.path)).toEqual(["/hook"]);

    const moved = receiver.url.replace(/\/hook$/, "/moved");
    let res = await patchEndpoint(endpoint.id, { url: moved, eventTypes: ["episode.completed", "episode.completed"] });
    const { endpoint: patched } = await json<{ endpoint: ApiSchema<"WebhookEndpoint"> }>(res, 200);
    expect(patched).toMatchObject({
      id: endpoint.id,
      projectId: t.projectId,
      url: moved,
      eventTypes: ["episode.completed"],
      pendingDeliveries: 1,
      lastDelivery: { id: d.id, status: "pending", statusCode: 503 },
    });
    expect((await endpoints(t.projectId))[0]).toMatchObject({ url: moved, eventTypes: ["episode.completed"] });

    // The pending delivery (a dataset.erased, no longer subscribed) still goes, to the new URL.
    receiver.answer = () => ({ status: 204 });
    await runNextAttempt(endpoint.id);
    expect(receiver.received.map((r) => r.path)).toEqual(["/hook", "/moved"]);
    expect(receiver.received[1].headers["webhook-id"]).toBe(d.id);
    [d] = await deliveries(endpoint.id);
    expect(d).toMatchObject({ status: "succeeded", attempts: 2 });
    expect(d.attemptLog.map((a) => a.statusCode)).toEqual([204, 503]);
    // New events follow the new types.
    await eraseEvent(t.projectId);
    expect(await deliveries(endpoint.id)).toHaveLength(1);

    // A field left out keeps its value; an empty body changes nothing.
    res = await patchEndpoint(endpoint.id, { eventTypes: ["dataset.erased"] });
    expect((await json<{ endpoint: ApiSchema<"WebhookEndpoint"> }>(res, 200)).endpoint).toMatchObject({
      url: moved,
      eventTypes: ["dataset.erased"],
    });
    res = await patchEndpoint(endpoint.id, { url: receiver.url });
    expect((await json<{ endpoint: ApiSchema<"WebhookEndpoint"> }>(res, 200)).endpoint).toMatchObject({
      url: receiver.url,
      eventTypes: ["dataset.erased"],
    });
    res = await patchEndpoint(endpoint.id, {});
    expect((await json<{ endpoint: ApiSchema<"WebhookEndpoint"> }>(res, 200)).endpoint).toEqual(
      (await endpoints(t.projectId))[0],
    );
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(receiver.received.map((r) => r.path)).toEqual(["/hook", "/moved", "/hook"]);
  });

  it("refuses what registration refuses, naming the field; 404s an unknown or deleted endpoint; needs a session", async () => {
    const t = await tenant("webhooks");
    const { endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    const refusals: [unknown, (string | number)[]][] = [
      [{ url: "https://10.0.0.1/hook" }, ["url"]],
      [{ url: "https://169.254.169.254/latest" }, ["url"]],
      [{ url: "http://example.com/hook", eventTypes: ["dataset.erased"] }, ["url"]],
      [{ url: "" }, ["url"]],
      [{ url: "   " }, ["url"]],
      [{ url: 42 }, ["url"]],
      [{ eventTypes: [] }, ["eventTypes"]],
      [{ eventTypes: ["no.such.event"] }, ["eventTypes", 0]],
      [{ eventTypes: "dataset.erased" }, ["eventTypes"]],
    ];
    for (const [body, path] of refusals) {
      const res = await patchEndpoint(endpoint.id, body);
      const refusal = await json<{ error: string; issues: { path: (string | number)[] }[] }>(res, 400);
      expect({ body, error: refusal.error, paths: refusal.issues.map((i) => i.path) }).toEqual({
        body,
        error: "Validation error",
        paths: [path],
      });
    }
    // Nothing of a refused body was kept.
    expect((await endpoints(t.projectId))[0]).toMatchObject({ url: receiver.url, eventTypes: ["dataset.erased"] });

    for (const id of ["whk_missing", endpoint.id]) {
      if (id === endpoint.id) {
        const token = await session();
        expect((await h.svc.request(`/dashboard/webhooks/${id}`, { method: "DELETE", token })).status).toBe(204);
      }
      for (const res of [
        await patchEndpoint(id, { url: receiver.url }),
        await patchEndpoint(id, {}),
        await rotateSecret(id),
      ]) {
        expect(await json<{ error: string }>(res, 404)).toEqual({ error: "Webhook endpoint not found" });
      }
    }
    const { endpoint: other } = await createEndpoint(t.projectId, ["dataset.erased"]);
    let res = await h.svc.request(`/dashboard/webhooks/${other.id}`, { method: "PATCH", json: { url: receiver.url } });
    expect(res.status).toBe(401);
    res = await h.svc.request(`/dashboard/webhooks/${other.id}/rotate-secret`, { method: "POST" });
    expect(res.status).toBe(401);
  });
});

describe("rotating an endpoint's secret", () => {
  it("signs with the new and the replaced secret for a day, then with the new one alone", async () => {
    const t = await tenant("webhooks");
    const { secret: first, endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    const rotatedAt = h.clock.now().getTime();
    const res = await rotateSecret(endpoint.id);
    const rotated = await json<{
      secret: string;
      previousSecretExpiresAt: string;
      endpoint: ApiSchema<"WebhookEndpoint">;
    }>(res, 200);
    const second = rotated.secret;
    expect(second).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(second).not.toBe(first);
    expect(rotated.previousSecretExpiresAt).toBe(new Date(rotatedAt + SECRET_OVERLAP_MS).toISOString());
    expect(rotated.endpoint).toEqual((await endpoints(t.projectId))[0]);
    // Shown once: the list carries neither secret.
    const listed = JSON.stringify(await endpoints(t.projectId));
    for (const secret of [first, second]) expect(listed).not.toContain(secret);

    const secrets = { first, second };
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(String(receiver.received.at(-1)?.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    expect(verifiedBy(secrets)).toEqual(["first", "second"]);

    // The last moment of the day: both still sign.
    h.clock.set(new Date(rotatedAt + SECRET_OVERLAP_MS - 1_000));
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(verifiedBy(secrets)).toEqual(["first", "second"]);

    // A day after the rotation: the new secret alone.
    h.clock.set(new Date(rotatedAt + SECRET_OVERLAP_MS));
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(String(receiver.received.at(-1)?.headers["webhook-signature"]).split(" ")).toHaveLength(1);
    expect(verifiedBy(secrets)).toEqual(["second"]);
    expect(receiver.received).toHaveLength(3);
    expect((await deliveries(endpoint.id)).map((d) => d.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
  });

  it("a second rotation within the day replaces the previous secret: the one before stops signing at once", async () => {
    const t = await tenant("webhooks");
    const { secret: first, endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    const second = (await json<{ secret: string }>(await rotateSecret(endpoint.id), 200)).secret;
    h.clock.advance(3_600_000);
    const rotatedAgain = h.clock.now().getTime();
    const third = await json<{ secret: string; previousSecretExpiresAt: string }>(await rotateSecret(endpoint.id), 200);
    // The day starts again from the second rotation.
    expect(third.previousSecretExpiresAt).toBe(new Date(rotatedAgain + SECRET_OVERLAP_MS).toISOString());
    const secrets = { first, second, third: third.secret };
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(verifiedBy(secrets)).toEqual(["second", "third"]);
    h.clock.set(new Date(rotatedAgain + SECRET_OVERLAP_MS));
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(verifiedBy(secrets)).toEqual(["third"]);
  });

  it("a replayed delivery and a pending retry are signed with the secrets of their attempt's moment", async () => {
    const t = await tenant("webhooks");
    const { secret: first, endpoint } = await createEndpoint(t.projectId, ["dataset.erased"]);
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(verifiedBy({ first })).toEqual(["first"]);
    const [d] = await deliveries(endpoint.id);

    const rotatedAt = h.clock.now().getTime();
    const second = (await json<{ secret: string }>(await rotateSecret(endpoint.id), 200)).secret;
    const secrets = { first, second };
    const replay = async () => {
      const res = await h.svc.request(`/dashboard/webhooks/deliveries/${d.id}/replay`, {
        method: "POST",
        token: await session(),
      });
      await json(res, 200);
      await runDueJobs(h.svc.deps);
      expect(receiver.received.at(-1)?.headers["webhook-id"]).toBe(d.id);
    };
    await replay();
    expect(verifiedBy(secrets)).toEqual(["first", "second"]);

    // A retry waiting across the day's end: its attempt after it is signed with the new secret alone.
    receiver.answer = () => ({ status: 503 });
    h.clock.set(new Date(rotatedAt + SECRET_OVERLAP_MS - 10_000));
    await eraseEvent(t.projectId);
    await runDueJobs(h.svc.deps);
    expect(verifiedBy(secrets)).toEqual(["first", "second"]);
    receiver.answer = () => ({ status: 204 });
    await runNextAttempt(endpoint.id);
    expect(h.clock.now().getTime()).toBeGreaterThanOrEqual(rotatedAt + SECRET_OVERLAP_MS);
    expect(verifiedBy(secrets)).toEqual(["second"]);

    await replay();
    expect(verifiedBy(secrets)).toEqual(["second"]);
    expect(receiver.received).toHaveLength(5);
  });
});

describe("backoff", () => {
  it("doubles from 30 s up to 4 h, the last attempt at the end of the day, then none", () => {
    const t0 = new Date("2026-01-01T00:00:00Z");
    const until = new Date(t0.getTime() + DISABLE_AFTER_MS);
    const delays = [1, 2, 3, 4, 10, 11].map((n) => (nextAttemptAt(n, t0, until)?.getTime() ?? 0) - t0.getTime());
    expect(delays).toEqual([30_000, 60_000, 120_000, 240_000, 4 * 3_600_000, 4 * 3_600_000]);
    const late = new Date(until.getTime() - 1000);
    expect(nextAttemptAt(12, late, until)).toEqual(until);
    expect(nextAttemptAt(13, until, until)).toBeNull();
  });
});

import { createServer } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type PublishRequest, publishPlan, retryBackoffMs, startLocalQStash } from "./qstash-endpoint";

const token = "tok";
const now = 1_700_000_000_000;
const publish = (
  headers: Record<string, string> = {},
  path = "/v2/publish/http://w.test/jobs/run",
): PublishRequest => ({
  method: "POST",
  path,
  headers: { authorization: `Bearer ${token}`, ...headers },
  body: '{"job":1}',
});
const none = () => undefined;

describe("publishPlan", () => {
  it("answers an unknown route, a wrong token and a bad destination before anything else", () => {
    expect(publishPlan({ ...publish(), method: "GET" }, token, now, none)).toMatchObject({ status: 404 });
    expect(publishPlan(publish({ authorization: "Bearer no" }), token, now, none)).toMatchObject({ status: 401 });
    expect(publishPlan(publish({}, "/v2/publish/ftp://x"), token, now, none)).toMatchObject({ status: 400 });
  });

  it("a duplicate within the window gets the first message's id, whatever its headers", () => {
    const plan = publishPlan(publish({ "upstash-deduplication-id": "d1", "upstash-delay": "bad" }), token, now, (id) =>
      id === "d1" ? "msg_first" : undefined,
    );
    expect(plan).toEqual({
      status: 202,
      payload: { messageId: "msg_first", url: "http://w.test/jobs/run", deduplicated: true },
    });
  });

  it("due at Upstash-Not-Before, else after Upstash-Delay, else now; a bad one is a 400", () => {
    expect(publishPlan(publish({ "upstash-not-before": "1700000100" }), token, now, none)).toMatchObject({
      dueAt: 1_700_000_100_000,
    });
    expect(publishPlan(publish({ "upstash-delay": "1m30s" }), token, now, none)).toMatchObject({ dueAt: now + 90_000 });
    expect(publishPlan(publish(), token, now, none)).toMatchObject({ dueAt: now });
    expect(publishPlan(publish({ "upstash-not-before": "soon" }), token, now, none)).toMatchObject({ status: 400 });
    expect(publishPlan(publish({ "upstash-delay": "5 minutes" }), token, now, none)).toMatchObject({ status: 400 });
  });

  it("forwards Upstash-Forward-* headers and the content type; retries default to 3", () => {
    const plan = publishPlan(
      publish({ "upstash-forward-x-a": "1", "content-type": "application/json", "upstash-method": "PUT" }),
      token,
      now,
      none,
    );
    expect(plan).toMatchObject({
      message: {
        destination: "http://w.test/jobs/run",
        method: "PUT",
        body: '{"job":1}',
        headers: { "x-a": "1", "content-type": "application/json" },
        retries: 3,
      },
    });
    expect(publishPlan(publish({ "upstash-retries": "0" }), token, now, none)).toMatchObject({
      message: { retries: 0 },
    });
  });
});

describe("retryBackoffMs", () => {
  it("a second, doubling, at most a minute", () => {
    expect([0, 1, 2, 6, 10].map(retryBackoffMs)).toEqual([1000, 2000, 4000, 60_000, 60_000]);
  });
});

describe("startLocalQStash", () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  it("delivers a publish, signed, with its forwarded headers; a duplicate is not delivered again", async () => {
    const received: { headers: Record<string, unknown>; body: string }[] = [];
    const target = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => {
        body += c;
      });
      req.on("end", () => {
        received.push({ headers: req.headers, body });
        res.end("ok");
      });
    });
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", () => r()));
    closers.push(() => new Promise((r) => target.close(r)));
    const qstash = await startLocalQStash({ log: { error: () => {} } });
    closers.push(qstash.close);
    const destination = `http://127.0.0.1:${(target.address() as { port: number }).port}/jobs/run`;
    const send = () =>
      fetch(`${qstash.url}/v2/publish/${destination}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${qstash.token}`,
          "upstash-deduplication-id": "d1",
          "upstash-forward-x-a": "1",
          "content-type": "application/json",
        },
        body: '{"job":1}',
      });
    const first = await send();
    expect(first.status).toBe(201);
    const { messageId } = (await first.json()) as { messageId: string };
    const again = await send();
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({ messageId, deduplicated: true });
    for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 50));
    expect(received).toHaveLength(1);
    expect(received[0].body).toBe('{"job":1}');
    expect(received[0].headers).toMatchObject({ "x-a": "1", "upstash-message-id": messageId, "upstash-retried": "0" });
    expect(String(received[0].headers["upstash-signature"])).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  });
});

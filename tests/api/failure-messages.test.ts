import { describe, expect, it } from "vitest";
import { createApp } from "../../functions/app";
import { parseConfig } from "../../lib/config";

/**
 * The 500 message each route declares with its 500 response (functions/schemas/errors.ts,
 * failureResponse) is the one its unexpected failures answer with, even a failure before the
 * route's handler runs: here the host cannot supply its dependencies at all, so every request
 * fails in the middleware ahead of the route.
 */
const app = createApp({
  deps: () => {
    throw new Error("no database");
  },
  corsOrigins: parseConfig({}).corsOrigins,
});

const call = async (method: string, path: string) => {
  const res = await app.request(path, {
    method,
    headers: { authorization: "Bearer msk_test", "content-type": "application/json" },
    body: method === "GET" ? undefined : "{}",
  });
  return { status: res.status, body: await res.json() };
};

describe("declared 500 messages", () => {
  it.each([
    ["POST", "/v1/threads", "Failed to create thread"],
    ["POST", "/v1/memory/recall", "Failed to recall memory"],
    ["POST", "/v1/memory/working/threads/thr_1/chat", "Failed to generate reply"],
    ["POST", "/v1/memory/working/threads/thr_1/compact", "Failed to compact thread"],
    ["GET", "/v1/memory/semantic/datasets/ds/entities", "Failed to list entities"],
    ["GET", "/v1/threads/thr_1", "Internal server error"],
    ["POST", "/v1/memory/working/threads/thr_1/messages", "Internal server error"],
  ])("%s %s: %s", async (method, path, error) => {
    expect(await call(method, path)).toEqual({ status: 500, body: { error } });
  });

  it("a path no route answers stays 404", async () => {
    expect(await call("GET", "/v1/nothing")).toEqual({ status: 404, body: { error: "Not found" } });
  });
});
